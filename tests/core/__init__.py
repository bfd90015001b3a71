"""The core's tests: no Textual, no console (``tui`` outside ``tui.ui``, ``bench``, ``tools``),
on real processes, real HTTP on loopback and real files."""

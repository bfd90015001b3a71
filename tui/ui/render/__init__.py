"""The console's only reach into Textual's private internals, each hook checked before it runs.

Everything else of the console uses Textual's public API. Two hooks here buy CPU on the render
path: ``dirty_rows.DirtyRowsCompositor`` (a main screen's partial update renders the changed rows
of the changed widgets) and ``screen_refresh.ScreenRefresh`` (a panel's repaint marked on its
screen without two messages). ``hooks`` decides whether each runs: only on the Textual release it
was checked on, with every private name it uses still there, and not switched off by
``GPUFLEET_PLAIN`` (``tui.plain``); otherwise the console takes Textual's own path.
"""

"""The console's only reach into Textual's private internals, each hook checked before it runs.

Everything else of the console uses Textual's public API. One hook here buys CPU on the render
path: ``dirty_rows.DirtyRowsCompositor`` (a main screen's partial update renders the changed rows
of the changed widgets). ``hooks`` decides whether it runs: only on the Textual release it was
checked on, with every private name it uses still there, and not switched off by
``GPUFLEET_PLAIN`` (``tui.plain``); otherwise the console takes Textual's own path.
"""

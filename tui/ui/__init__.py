"""The Textual console: the only package that imports Textual.

Everything here reads the core's immutable snapshots and posts intents to the core through the
protocols in ``tui.ui.sources``; nothing here samples NVML, probes HTTP or reads files on the
event loop.
"""

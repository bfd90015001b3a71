"""gpufleet: a terminal console for a fleet of SGLang servers and the generation job they feed.

The package has two layers. Everything outside ``tui.ui`` is the core and never imports Textual
(``tests/core/test_layers.py`` proves it); ``tui.ui`` is the Textual console on top of it.
"""

__version__ = "0.1.0"

"""``python -m tui`` is the same as the ``gpufleet`` console script."""

from tui.cli import main

raise SystemExit(main())

"""The console's tests, in-process: ``app.run_test`` Pilot tests, SVG snapshots (beside them in
``__snapshots__``) and the console's own modules (``tui.ui``) read without a terminal."""

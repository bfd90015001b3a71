"""The console's alerts: the runner fed each poll off the loop, the count in the header, the
bell, the list screen (``host``, ``alerts_screen``)."""

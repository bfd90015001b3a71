"""End to end in real terminals and processes: the console in tmux, ``gpufleet serve`` in a
browser, the agents over SSH, and commands walked from the command line to the fleet."""

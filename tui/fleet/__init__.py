"""The fleet (core): GPU, server process, port, log and live load joined per GPU."""

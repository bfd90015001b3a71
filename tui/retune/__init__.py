"""Retune and verify: stop, relaunch with a profile, verify every GPU, measure, journal."""

"""Canary retunes, rolling rollouts and the measured cost of a retune (core, no Textual)."""

"""Canary and rolling rollout screens."""

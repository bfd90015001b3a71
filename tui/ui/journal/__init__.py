"""The journal of applies, canaries and rollouts."""

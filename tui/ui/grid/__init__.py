"""The grid of GPU panels."""

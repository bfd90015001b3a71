"""The autotune screen: the detached search's status, its throughput plot, and its controls."""

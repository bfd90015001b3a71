"""gpufleet's benchmarks: each number is a ratio against a peer or floor from the same run."""

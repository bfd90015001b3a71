"""GPU layer (core): NVML sampling and the simulated fleet's GPU telemetry, as one snapshot type."""

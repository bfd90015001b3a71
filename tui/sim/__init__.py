"""The simulated SGLang server (``gpufleet sim``): SGLang's phases, logs, HTTP API and failures."""

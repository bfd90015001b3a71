"""The per-node agent: Prometheus ``/metrics`` and a token-guarded control API over the
operations core, and the clients (console, pipeline) that use many agents at once."""

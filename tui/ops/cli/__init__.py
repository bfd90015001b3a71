"""Headless commands of the operations core: ``gpufleet apply``, ``canary``, ``rollout``,
``journal`` and ``sim-fleet``; each a ``main(argv) -> int`` over ``tui.ops.service.FleetOps``."""

"""Ports belong to the fleet, flags to the profile: fit a profile to the running fleet.

The console, the pipeline and the monitor watch each GPU on one port, one host and one log file.
A profile written for another fleet (another ``base_port``, log directory or simulated speed)
must not move a GPU off them: the new server would listen where nobody looks, and the GPU would
drop out of the job while its memory belongs to a server nobody watches. The same holds for the
card a slot runs on (``[gpu.N] device``: slots sharing one GPU): a profile written for a fleet
of one server per card must not move a slot onto a card it never ran on. So every operation
launches ``fit_to_fleet(profile, ...)``: the profile's flags, with each GPU's port and device,
the host, the log location and (for the simulator) the simulated hardware and speed of the
fleet. The fitted
profile is what runs, and what the fleet state records and the dialogs name.
"""

from __future__ import annotations

from dataclasses import replace

from tui.profiles import GpuOverride, Profile
from tui.state.fleet_state import FleetState, profile_of


def reference_profile(state: FleetState, base: Profile | None = None) -> Profile | None:
    """The profile that describes the fleet's layout: ``base`` (the console's), else the one
    most GPUs run now (from the fleet state), else None (nothing is known)."""
    if base is not None:
        return base
    docs = [s.current for _, s in sorted(state.items()) if s.current]
    if not docs:
        return None
    names = [str(d.get("name")) for d in docs]
    common = max(set(names), key=names.count)
    try:
        return profile_of(next(d for d in docs if str(d.get("name")) == common))
    except Exception:  # a stored document that no longer validates describes no layout
        return None


def fit_to_fleet(profile: Profile, state: FleetState, base: Profile | None = None) -> Profile:
    """``profile``'s flags on the fleet's ports, host, log files and simulated hardware.

    Args:
        profile: The profile to launch (validated).
        state: The fleet state (each GPU's port).
        base: The profile describing the fleet (the console's), when known.

    Returns:
        The profile that will actually run: same name, note, flags and per-GPU overrides; each
        GPU on the port the fleet uses for it (the state's, else ``base``'s, else the
        profile's own), and the host, log location and simulated hardware of the fleet.
    """
    ref = reference_profile(state, base)
    ports, devices = [], {}
    for gpu in profile.gpus:
        known = state.get(gpu)
        if known is not None and known.port is not None:
            ports.append(known.port)
            devices[gpu] = known.device_index
        elif ref is not None and gpu in ref.gpus:
            ports.append(ref.port_for(gpu))
            devices[gpu] = ref.device_for(gpu)
        else:
            ports.append(profile.port_for(gpu))
            devices[gpu] = profile.device_for(gpu)
    fitted = with_devices(replace(profile, ports=tuple(ports)), devices)
    if ref is None:
        return fitted
    engine = profile.engine
    if engine.kind == ref.engine.kind == "sim":
        # The simulated hardware is the fleet's, not the candidate's: a canary at another speed
        # would be compared with its controls at a different clock.
        engine = replace(engine, sim_gpu=ref.engine.sim_gpu, sim_speed=ref.engine.sim_speed)
    return replace(fitted, host=ref.host, log_dir=ref.log_dir, log_file=ref.log_file, engine=engine)


def with_devices(profile: Profile, devices: dict[int, int]) -> Profile:
    """``profile`` with each slot's ``[gpu.N] device`` set to ``devices[N]`` (left out where it
    is the slot's own index)."""
    if all(profile.device_for(g) == d for g, d in devices.items()):
        return profile
    overrides = {o.gpu: o for o in profile.overrides}
    for gpu, device in devices.items():
        old = overrides.get(gpu, GpuOverride(gpu))
        overrides[gpu] = replace(old, device=None if device == gpu else device)
    kept = (o for o in overrides.values() if o.values or o.extra_flags or o.device is not None)
    return replace(profile, overrides=tuple(sorted(kept, key=lambda o: o.gpu)))


def moved_ports(profile: Profile, fitted: Profile) -> list[str]:
    """'GPU 6: 32006 -> 31006' for every GPU the fit kept on the fleet's port (for dialogs)."""
    return [
        f"GPU {g}: {profile.port_for(g)} -> {fitted.port_for(g)}"
        for g in profile.gpus
        if profile.port_for(g) != fitted.port_for(g)
    ]

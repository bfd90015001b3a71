"""The fleet's server base URLs, from a tuning profile (``gpufleet generate --profile NAME``)."""

from __future__ import annotations

import ipaddress

from tui.profiles import Profile

_WILDCARDS = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}
"""Bind addresses that mean "every interface": a client connects to loopback instead."""


def connect_host(bind_host: str) -> str:
    """The address a client on this machine uses to reach a server bound to ``bind_host``.

    Args:
        bind_host: the profile's ``fleet.host`` (what the servers bind).

    Returns:
        A host for a URL: wildcards become loopback, IPv6 literals are bracketed.
    """
    host = _WILDCARDS.get(bind_host.strip(), bind_host.strip())
    try:
        if ipaddress.ip_address(host.strip("[]")).version == 6:
            return f"[{host.strip('[]')}]"
    except ValueError:
        pass  # a host name, used as written
    return host


def server_urls(profile: Profile) -> list[str]:
    """Base URL of every server in ``profile``, in the order of its GPUs.

    Args:
        profile: a loaded profile.

    Returns:
        ``http://HOST:PORT`` per GPU (``port_for(gpu)``), HOST from :func:`connect_host`.
    """
    host = connect_host(profile.host)
    return [f"http://{host}:{profile.port_for(gpu)}" for gpu in profile.gpus]

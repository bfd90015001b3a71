"""Log path templates of a profile, checked after expansion for every GPU it launches.

``fleet.log_file`` may use ``{gpu}`` and ``{port}`` (with an integer format spec such as
``{gpu:02d}``) and ``fleet.log_dir`` may use ``{state}``. ``str.format`` alone would accept far
more (``{port.__doc__}``, ``{gpu!r}``) and expand it into junk file names, so each field is
checked by name, and each expanded name must be a plain, distinct file name.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

MAX_NAME_BYTES = 255
"""Longest file name most file systems allow."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
_INT_SPEC = re.compile(r"^0?[1-9]?d?$")


def _fields(template: str) -> list[tuple[str, str, str | None]] | str:
    """(field name, format spec, conversion) of every placeholder, or why it cannot be parsed."""
    try:
        return [
            (name, spec or "", conversion)
            for _, name, spec, conversion in string.Formatter().parse(template)
            if name is not None
        ]
    except ValueError as exc:
        return f"is not a valid template ({exc})"


def log_file_problem(template: str, gpus: Sequence[int], ports: Sequence[int]) -> str | None:
    """Why ``fleet.log_file`` cannot be used for these GPUs, or None when it can.

    Args:
        template: the ``fleet.log_file`` value.
        gpus: the profile's GPU indices.
        ports: their ports, in the same order.

    Returns:
        The problem (a message for the profile error), or None.
    """
    fields = _fields(template)
    if isinstance(fields, str):
        return fields
    names = {name for name, _, _ in fields}
    if not names & {"gpu", "port"}:
        return "must contain {gpu} or {port} so servers do not share a log"
    for name, spec, conversion in fields:
        if name not in ("gpu", "port") or conversion is not None or not _INT_SPEC.match(spec):
            shown = (
                "{"
                + name
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
            return f"{shown}: only {{gpu}} and {{port}} placeholders are allowed (e.g. {{gpu:02d}})"
    expanded = [template.format(gpu=gpu, port=port) for gpu, port in zip(gpus, ports, strict=False)]
    for name in expanded:
        if not _NAME.match(name) or len(name.encode()) > MAX_NAME_BYTES:
            return (
                f"expands to {name!r}: a log file name must be letters, digits, '.', '_', '+' or "
                f"'-' (starting with a letter or digit), at most {MAX_NAME_BYTES} bytes"
            )
    if len(set(expanded)) != len(expanded):
        return f"expands to the same name for two GPUs ({sorted(expanded)[:4]})"
    return None


def log_dir_problem(template: str) -> str | None:
    """Why ``fleet.log_dir`` cannot be used, or None (only ``{state}`` may be a placeholder)."""
    fields = _fields(template)
    if isinstance(fields, str):
        return fields
    for name, spec, conversion in fields:
        if name != "state" or spec or conversion is not None:
            return "only the {state} placeholder is allowed"
    return None


def _candidates(name: str, gpu: int, port: int) -> set[str]:
    """The templates that expand to ``name`` for this GPU and port: one occurrence of the port
    as ``{port}`` or of the GPU index as ``{gpu}``."""
    found = set()
    for value, field in ((str(port), "{port}"), (str(gpu), "{gpu}")):
        start = name.find(value)
        while start >= 0:
            found.add(name[:start] + field + name[start + len(value) :])
            start = name.find(value, start + 1)
    return found


def template_for(names: Sequence[tuple[int, int, str]]) -> str | None:
    """The ``fleet.log_file`` that names each server's own log file (``gpufleet adopt``).

    Args:
        names: (GPU, port, file name) of each server.

    Returns:
        A template every server's name follows, valid for them (``log_file_problem``); a whole
        port as ``{port}`` is preferred (in ``s-30001.log``, ``s-3000{gpu}.log`` fits GPU 1 on
        port 30001 by chance); None when there is none.
    """
    common: set[str] | None = None
    for gpu, port, name in names:
        found = _candidates(name, gpu, port)
        common = found if common is None else common & found
    gpus = [gpu for gpu, _, _ in names]
    ports = [port for _, port, _ in names]
    usable = sorted(
        (t for t in common or () if log_file_problem(t, gpus, ports) is None),
        key=lambda t: ("{port}" not in t, t),
    )
    return usable[0] if usable else None

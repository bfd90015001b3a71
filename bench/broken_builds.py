"""Deliberately broken builds of gpufleet, for showing that an attack row can fail.

Each is a ``sitecustomize.py`` that patches one check out of gpufleet before anything imports
it (``Workspace(..., broken=NAME)`` puts it first on the ``PYTHONPATH`` of every command the
workspace runs, the agents and servers it starts included). A row run against the build that
lacks the check it is about must say FAIL (``tests/core/test_bench_attack_rows.py``): a row that
passes whatever the build is checks nothing (issue 36: the "+24 s clock" rows passed with the
shift at -9.6e8 s too).
"""

from __future__ import annotations

from pathlib import Path

BROKEN: dict[str, str] = {
    # Identity read in a time namespace as the kernel shows it there: every start moves.
    "no-timens": """
import tui.servers.procinfo as procinfo
procinfo.boottime_offset_ticks = lambda: 0
""",
    # Identity that trusts the record: whatever runs at the pid is the fleet's.
    "trust-record": """
import importlib
import psutil
identity = importlib.import_module("tui.control.identity")
def verify(record):
    try:
        return identity.Identity(True, psutil.Process(record.pid))
    except psutil.NoSuchProcess:
        return identity.Identity(False, None)
everywhere(identity, "verify", verify)
""",
    # The group to signal is the record's, whoever leads it now.
    "trust-pgid": """
import importlib
stop = importlib.import_module("tui.control.stop")  # the package's ``stop`` is a function
def trusted(record, leader):
    return (record.pgid if record.pgid > 1 else None, "")
everywhere(stop, "group_to_signal", trusted)
""",
    # The agent's pid file judged by its wall-clock start again.
    "pidfile-wallclock": """
import tui.agent.pidfile as pidfile
def other_start(record, proc):
    create_time = proc.create_time()
    if abs(create_time - record.create_time) > 0.05:
        return f"started {create_time:.2f}, the agent {record.create_time:.2f}"
    return ""
pidfile._other_start = other_start
""",
    # The token file taken whatever its mode.
    "any-token-mode": """
import tui.servers.tokens as tokens
tokens.check_private = lambda path, found: None
""",
    # The environment's old deny-list: only the loader's variables refused.
    "env-denylist": """
import tui.agent.policy as policy
def check_env(self, name, value, where):
    if policy.loader_variable(name):
        raise policy.PolicyError(f"{where}: env.{name}: not allowed through the agent")
policy.ApiPolicy._check_env = check_env
""",
    # The agent's job found by its command line, whoever runs it, its options read from it.
    "job-by-cmdline": """
import os
from pathlib import Path
import psutil
import tui.pipeline.job_record as job_record
from tui.ops.pipeline import is_pipeline_of
def by_cmdline(status):
    for proc in psutil.process_iter():
        try:
            line = proc.cmdline()
            if is_pipeline_of(line, Path(status)):
                yield proc, line
        except psutil.Error:
            continue
def read_record(status):
    for proc, line in by_cmdline(status):
        options = tuple(line[line.index("generate") + 1 :])
        return job_record.JobRecord("0" * 32, options, proc.cwd(), os.path.abspath(status),
                                    "/dev/null", 0.0)
    return None
job_record.read_record = read_record
job_record.job_processes = lambda record: [p for p, _ in by_cmdline(record.status_path)]
""",
    # No header deadline, no limit per address (uvicorn's and aiohttp's defaults).
    "no-connection-limits": """
import tui.agent.http_limits as http_limits
from uvicorn.protocols.http.h11_impl import H11Protocol
http_limits.guarded_h11 = lambda table, header_timeout_s=10.0: H11Protocol
import tui.servers.connections as connections
connections.ConnectionTable.admit = lambda self, address, connection: True
import tui.ui.serve.limits as serve_limits
serve_limits.HEADER_TIMEOUT_S = 75.0
""",
    # A profile document checked without a bound on its GPUs.
    "unbounded-profile": """
import tui.agent.requests as requests
assert hasattr(requests, "_bounded"), "the bound moved: this build would prove nothing"
requests._bounded = lambda doc: None
""",
    # The newest lines of a log read from its last MiB, its cut first line dropped.
    "tail-last-mib": """
import tui.logs.long_lines as long_lines
from tui.inputs import open_stream
def tail_lines(path, max_lines, cap=0):
    try:
        with open_stream(path, "a log") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - (1 << 20)))
            lines = handle.read().decode("utf-8", errors="replace").splitlines()
    except Exception:
        return []
    return (lines[1:] if size > (1 << 20) else lines)[-max_lines:]
long_lines.tail_lines = tail_lines
""",
    # gpufleet serve with no limit on browser sessions.
    "unlimited-sessions": """
import tui.ui.serve.server as server
server.ConsoleServer._full = lambda self: None
""",
}
"""Name -> the ``sitecustomize.py`` that makes that build."""


PRELUDE = """
import sys
def everywhere(module, name, new):
    # Also where it was imported by name already (tui.control's package imports its modules).
    old = getattr(module, name)
    for loaded in list(sys.modules.values()):
        if getattr(loaded, name, None) is old:
            setattr(loaded, name, new)
"""
"""What every broken build starts with."""


def install(name: str, directory: Path) -> Path:
    """Write broken build ``name`` into ``directory`` (put it on ``PYTHONPATH``); returns it.

    Raises:
        KeyError: no such build.
    """
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(
        f"# a deliberately broken gpufleet: {name} (bench.broken_builds)\n{PRELUDE}{BROKEN[name]}"
    )
    return directory

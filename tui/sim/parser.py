"""The simulator's command line: SGLang 0.5.23's own parser plus the ``--sim-*`` flags.

A module of its own, light on purpose: a simulated fleet's profile is checked against this parser
before anything stops (``tui.profiles.flag_check``), in the ``gpufleet apply`` process, which must
not pay for importing the server it would run (``tui.sim.server``: asyncio, uvicorn, starlette,
~0.13 s of a retune). ``tui.sim.cli`` parses its argv with the same parser.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tui.gpu.sim_records import SIM_GPU_KINDS
from tui.sglang.builds import BUILDS
from tui.sglang.flags import names_option, ranged
from tui.sglang.flagtable.parser import build_parser as sglang_parser
from tui.sglang.flagtable.table import load_table
from tui.sglang.modelcfg.errors import ModelConfigError
from tui.sglang.modelcfg.spec import resolve_model
from tui.sglang.models import MODELS
from tui.sim.build_table import table_version
from tui.sim.faults import parse_faults


def build_parser(raising: bool = False, build: str | None = None) -> argparse.ArgumentParser:
    """The parser: SGLang's own (from its flag table) plus the ``--sim-*`` flags.

    Args:
        raising: raise instead of exiting on an error (for checking profiles).
        build: the ``--sim-build`` asked for (``tui.sim.build_table.requested_build``): its
            release's flag table where one is shipped.
    """
    parser = sglang_parser(
        load_table(table_version(build)),
        raising=raising,
        warn_deprecated=not raising,
        description="A simulated SGLang 0.5.23 server (gpufleet sim, one GPU).",
    )
    sim = parser.add_argument_group("simulator")
    sim.add_argument("--sim-gpu", choices=sorted(SIM_GPU_KINDS), default="b200")
    sim.add_argument(
        "--sim-model",
        type=sim_model,
        default="qwen3.6-27b",
        metavar="NAME|FOLDER",
        help=f"one of {', '.join(sorted(MODELS))}, or a model folder holding a config.json",
    )
    sim.add_argument(
        "--sim-speed",
        type=ranged(float, 0.0, 10000.0, low_open=True),
        default=1.0,
        help="time compression factor: 1 = real time",
    )
    sim.add_argument("--sim-gpu-index", type=ranged(int, 0, 255), default=None)
    sim.add_argument("--sim-startup-seconds", type=ranged(float, 0.0, 3600.0), default=None)
    sim.add_argument("--sim-seed", type=int, default=None)
    sim.add_argument("--sim-build", choices=BUILDS, default=BUILDS[0])
    sim.add_argument("--sim-fault", type=parse_faults, default=())
    sim.add_argument(
        "--gpu-backing",
        choices=("none", "cuda"),
        default="none",
        help="cuda: allocate the server's memory for real on its GPU with PyTorch (GPU machines)",
    )
    return parser


def sim_model(value: str) -> str:
    """``--sim-model``: a known model name, or a folder whose config.json the planner can derive
    (checked here, so a model it cannot plan is a usage error naming the missing field).

    Raises:
        argparse.ArgumentTypeError: neither.
    """
    if value in MODELS:
        return value
    if not Path(value).expanduser().is_dir():
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither a model name ({', '.join(sorted(MODELS))}) nor a folder"
        )
    try:
        resolve_model(value)
    except ModelConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def with_model_path(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``argv``, plus an empty ``--model-path`` when it names none.

    SGLang requires the flag; the simulator serves its simulated model's path instead.
    """
    return argv if names_option(parser, argv, "model_path") else [*argv, "--model-path", ""]


def requested_build(argv: list[str]) -> str | None:
    """The value of the last ``--sim-build`` in ``argv`` (``--sim-build X`` or ``=X``), if any."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--sim-build" and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--sim-build="):
            found = arg.partition("=")[2]
    return found

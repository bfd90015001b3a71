"""A profile's launch argv, judged by SGLang's own flag table before anything stops or starts.

For every GPU the exact argv (``launch_args.argv_parts``) goes through the parser rebuilt from
the table of the SGLang release the profile targets (``engine.sglang_version``: a release, or
``auto`` resolved by ``tui.profiles.sglang_release``; default the newest): the real server's
parser for ``engine.kind = "sglang"``, the simulator's (the same table plus its ``--sim-*``
flags) for ``"sim"``. Each release accepts its own aliases and refuses what it refuses:
``--cuda-graph-max-bs`` passes on 0.5.17 (a deprecated alias) and is refused on 0.5.23 (an
ambiguous prefix), each in that release's own words. Whatever SGLang would refuse (an unknown
flag, an ambiguous prefix, an invalid choice, a wrong type or arity, an unknown speculative
algorithm) becomes a ``Problem`` on the profile field that produced the token, with SGLang's
own reason, what is allowed and a "did you mean". Flags must be spelled in full
(``Checker.check(strict=True)``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from tui.profiles.errors import Problem
from tui.profiles.launch_args import ArgvPart, argv_parts
from tui.profiles.model import Profile
from tui.profiles.sglang_release import ReleaseError, target_release
from tui.sglang.flagtable.check import Checker, Rejection, sglang_checker
from tui.sglang.flagtable.table import PINNED_VERSION, UnknownVersion, load_table

_MAX_PER_GPU = 32
"""Problems collected per GPU argv before giving up (each needs one more parse)."""


@functools.cache
def _sim_checker(version: str) -> Checker:
    # The simulator's own parser (its --sim-* flags beside SGLang's), imported only when a sim
    # profile is checked; from its light module, not tui.sim.cli, which imports the server.
    from tui.sim.parser import build_parser, with_model_path

    parser = build_parser(raising=True)
    complete = functools.partial(with_model_path, parser)
    return Checker(load_table(version), parser, "gpufleet sim", complete)


def checker_for(profile: Profile) -> Checker:
    """The parser that will read this profile's argv: SGLang's, or the simulator's.

    Raises:
        UnknownVersion: no flag table for ``engine.sglang_version``.
        ReleaseError: ``auto`` could not be resolved.
    """
    version = target_release(profile)
    if profile.engine.kind == "sim":
        if version != PINNED_VERSION:
            load_table(version)  # raises UnknownVersion for a version without a table
            raise UnknownVersion(
                f"the simulator models SGLang {PINNED_VERSION} only, not {version!r}"
            )
        return _sim_checker(version)
    return sglang_checker(version)


def _part_at(parts: list[ArgvPart], index: int | None) -> ArgvPart | None:
    if index is None:
        return None
    seen = 0
    for part in parts:
        if seen <= index < seen + len(part.tokens):
            return part
        seen += len(part.tokens)
    return None


def _problem(rejection: Rejection, part: ArgvPart | None) -> Problem:
    if part is None and rejection.kind == "required" and rejection.option == "--model-path":
        return Problem("server.model_path", None, rejection.describe())
    if part is None:
        return Problem("argv", rejection.token, rejection.describe())
    message = rejection.describe()
    if part.field == "engine.legacy_mamba_flag":
        message = (
            "emits --mamba-scheduler-strategy, the name SGLang used before the rename: " + message
        )
    return Problem(part.field, part.value, message)


@functools.lru_cache(maxsize=1024)
def _verdict(checker: Checker, argv: tuple[str, ...]) -> Rejection | None:
    """SGLang's verdict on one argv, remembered (a parse costs milliseconds): the tuning form
    asks for the same argv of every GPU at each keystroke, to validate and then to predict."""
    return checker.check(argv, strict=True)


def launch_problems(profile: Profile, gpus: Iterable[int] | None = None) -> list[Problem]:
    """Everything SGLang would refuse in the launch argv of ``gpus`` (default: every GPU).

    Args:
        profile: a structurally valid profile.
        gpus: GPUs of the profile to check.

    Returns:
        One problem per offending field (the same problem on several GPUs is listed once).
    """
    try:
        checker = checker_for(profile)
    except (UnknownVersion, ReleaseError) as exc:
        return [Problem("engine.sglang_version", profile.engine.sglang_version, str(exc))]
    problems: list[Problem] = []
    for gpu in profile.gpus if gpus is None else gpus:
        parts = argv_parts(profile, gpu)
        for _ in range(_MAX_PER_GPU):
            argv = tuple(token for part in parts for token in part.tokens)
            rejection = _verdict(checker, argv)
            if rejection is None:
                break
            part = _part_at(parts, rejection.index)
            problem = _problem(rejection, part)
            if problem not in problems:
                problems.append(problem)
            if part is None:
                break  # nothing to take out and look past
            parts = [p for p in parts if p is not part]
    return problems

"""Build the flag tables from SGLang's own parsers: ``python -m tui.sglang.flagtable.generate``.

Runs SGLang's real launch path up to its argument parser, in this interpreter: ``import
sglang.launch_server``, ``load_plugins()`` and ``prepare_server_args(argv)`` exactly as
``python -m sglang.launch_server`` does (``sglang/launch_server.py``), catching the parser that
``prepare_server_args`` builds (``argparse.ArgumentParser(prog="sglang serve")`` filled by
``ServerArgs.add_cli_args``: the field declarations of ``srt/server_args.py`` and, from 0.5.20,
``srt/arg_groups/fields/*``, plus the dynamic-choice and deprecated flags). SGLang is the
release's own wheel, imported in place (``tui.sglang.flagtable.reference``); its heavy native
imports are answered by ``tui.sglang.flagtable.stubs``.

Usage::

    python -m tui.sglang.flagtable.generate --install --all   # fetch every release (pip, once)
    python -m tui.sglang.flagtable.generate --all             # rewrite every shipped table
    python -m tui.sglang.flagtable.generate --sglang-version 0.5.17       # one release's
    python -m tui.sglang.flagtable.generate --sglang-version 0.5.17 --out -   # print it whole
    python -m tui.sglang.flagtable.generate --parse-cases CASES.json   # run SGLang's parser
    python -m tui.sglang.flagtable.generate --parse-cases CASES.json --parser table  # ours
    python -m tui.sglang.flagtable.generate --parse-cases CASES.json --out T.json  # both

The shipped file of the newest release holds its whole table; an older release's is written as
a delta against the next newer release's shipped table (``tui.sglang.flagtable.table``), so
``--all`` writes them newest first. ``--out`` always writes the whole table.

Every call changes this process for good (stand-ins in ``sys.modules``, SGLang on ``sys.path``,
``SGLANG_*`` variables cleared), so it only ever runs as its own interpreter, one release each
(``--all`` runs one interpreter per release).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tui.outputs import replace_file
from tui.paths import sglang_reference_dir
from tui.sglang.flagtable import stubs
from tui.sglang.flagtable.cases import run_cases, table_spec_error
from tui.sglang.flagtable.describe import GeneratorError, describe
from tui.sglang.flagtable.parser import build_parser
from tui.sglang.flagtable.reference import (
    RELEASES,
    ReferenceError,
    deps_dir,
    install_reference,
    reference_ready,
    release,
    wheel_path,
)
from tui.sglang.flagtable.table import (
    PINNED_VERSION,
    FlagTable,
    SpecAlgorithms,
    load_table,
    table_path,
)


def _prepare_environment(version: str, root: Path) -> None:
    # Environment variables can change choices (SGLANG_KV_CANARY_ENABLE_TOKEN_ORACLE adds a
    # sampling backend): the table is SGLang's parser with none set. SGLANG_USE_CPU_ENGINE makes
    # the platform discovery that runs at import pick the CPU platform without asking torch.
    for key in [k for k in os.environ if k.startswith(("SGLANG_", "SGL_"))]:
        del os.environ[key]
    os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
    # 0.5.17's fla kernels warn at import that Triton has no GPU here: true, and beside the point.
    warnings.filterwarnings("ignore", message="Triton is not supported", category=UserWarning)
    sys.path[:0] = [str(wheel_path(version, root)), str(deps_dir(root))]
    stubs.install((*stubs.HEAVY, *release(version).stubs))


def base_of(version: str) -> str | None:
    """The release whose table ``version``'s shipped file is a delta of: the next newer one
    (None for the newest, shipped whole)."""
    order = list(RELEASES)
    index = order.index(version)
    return order[index + 1] if index + 1 < len(order) else None


def sglang_parser(version: str, root: Path) -> argparse.ArgumentParser:
    """Import SGLang ``version`` from its wheel under ``root``; return its launch parser.

    Args:
        version: a release of ``reference.RELEASES``.
        root: the reference directory (``tui.paths.sglang_reference_dir()``).

    Returns:
        The ``argparse.ArgumentParser`` that ``prepare_server_args`` filled.

    Raises:
        GeneratorError: SGLang missing, of another version, or the parser not caught.
    """
    if not reference_ready(version, root):
        raise GeneratorError(
            f"SGLang {version} is not installed in {root}: run python -m "
            f"tui.sglang.flagtable.generate --install --sglang-version {version} (or make venv)"
        )
    _prepare_environment(version, root)
    import sglang.launch_server as launch
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import ServerArgs
    from sglang.version import __version__ as found

    if found != version:
        raise GeneratorError(f"{root} gave SGLang {found}, not {version}")
    load_plugins()
    caught: list[argparse.ArgumentParser] = []
    original: Callable[[argparse.ArgumentParser], None] = ServerArgs.add_cli_args

    def catch(parser: argparse.ArgumentParser) -> None:
        caught.append(parser)
        original(parser)

    ServerArgs.add_cli_args = staticmethod(catch)  # type: ignore[method-assign,assignment]
    try:
        # No --model-path: the parser stops at "required" (exit 2) before anything else runs.
        with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):
            launch.prepare_server_args([])
    finally:
        ServerArgs.add_cli_args = staticmethod(original)  # type: ignore[method-assign]
    if len(caught) != 1:
        raise GeneratorError(f"prepare_server_args built {len(caught)} parsers, expected 1")
    return caught[0]


def _spec_resolve(name: str) -> str:
    """The member SGLang's server resolves ``name`` to (ValueError: none), as ``run_server``
    does: ``handle_speculative_decoding`` upper-cases it and resolves the CLI aliases
    (``srt/arg_groups/speculative_hook.py``), then ``SpeculativeAlgorithm.from_string``. Up to
    0.5.17 only the hook knows NEXTN; later ``from_string`` knows it too."""
    from sglang.srt.arg_groups import speculative_hook
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    try:
        return str(SpeculativeAlgorithm.from_string(name).name)
    except ValueError as exc:
        resolve = getattr(speculative_hook, "_resolve_speculative_algorithm_alias", None)
        alias = resolve(name.upper(), None) if resolve is not None else None
        if alias is None or alias == name.upper():
            raise exc from None
        return str(SpeculativeAlgorithm.from_string(alias).name)


def _speculative() -> SpecAlgorithms:
    from sglang.srt.speculative import spec_registry
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    aliases = tuple(
        (alias, _spec_resolve(alias)) for alias in sorted(spec_registry._RESERVED_ALIASES)
    )
    probe = "NO_SUCH_ALGORITHM_5c1d"
    try:
        SpeculativeAlgorithm.from_string(probe)
    except ValueError as exc:
        error = str(exc).replace(probe, "{name}")
    else:
        raise GeneratorError(f"SpeculativeAlgorithm.from_string accepted {probe!r}")
    return SpecAlgorithms(tuple(a.name for a in SpeculativeAlgorithm), aliases, error)


def _type_data() -> tuple[tuple[str, Any], ...]:
    from sglang.srt.model_executor import cuda_graph_config as cg

    # Whether --cuda-graph-config refuses a retired backend inside its object (0.5.22 on): asked
    # of SGLang's converter itself, with a key every release allows.
    try:
        cg.parse_cuda_graph_config_arg('{"decode": {"backend": "tc_piecewise"}}')
    except argparse.ArgumentTypeError:
        checks_backend = True
    else:
        checks_backend = False
    return (  # sorted by name, as FlagTable.from_json reads them back
        ("cuda_graph_allowed_keys", {k: list(v) for k, v in cg.ALLOWED_KEYS_PER_PHASE.items()}),
        ("cuda_graph_config_checks_backend", checks_backend),
        ("cuda_graph_phases", list(cg.Phase.ALL)),
    )


def build_table(
    version: str, reference: Path, parser: argparse.ArgumentParser | None = None
) -> FlagTable:
    """The flag table of SGLang ``version`` as its own code defines it (see the module doc).

    Args:
        version: the release.
        reference: the reference directory.
        parser: its parser, when ``sglang_parser`` already built it in this process.
    """
    parser = parser or sglang_parser(version, reference)
    if not parser.allow_abbrev or parser.prefix_chars != "-" or parser.fromfile_prefix_chars:
        raise GeneratorError("SGLang's parser changed its argparse settings: extend the table")
    if parser._mutually_exclusive_groups:
        raise GeneratorError("SGLang's parser has mutually exclusive groups: extend the table")
    from sglang.srt.arg_groups import arg_utils
    from sglang.srt.server_args import ServerArgs

    # Arg(fallback=...) came in 0.5.20; before it a flag's default was its effective value.
    fallbacks_of: Callable[[type], dict[str, Any]] = getattr(
        arg_utils, "fallbacks_of", lambda cls: {}
    )
    return FlagTable(
        sglang_version=version,
        prog=parser.prog,
        allow_abbrev=parser.allow_abbrev,
        flags=tuple(describe(a) for a in parser._actions),
        speculative=_speculative(),
        type_data=_type_data(),
        fallbacks=tuple(sorted(fallbacks_of(ServerArgs).items())),
        python=".".join(map(str, sys.version_info[:3])),
    )


def _sglang_spec_error(name: str) -> str | None:
    try:
        _spec_resolve(name)
    except ValueError as exc:
        return f"ValueError: {exc}"
    return None


def _generate_all(root: Path) -> int:
    """Every release's table, newest first (a delta reads the newer table it is written
    against), each in its own interpreter (SGLang imports once per process)."""
    for version in reversed(RELEASES):
        command = [sys.executable, "-m", "tui.sglang.flagtable.generate"]
        command += ["--sglang-version", version, "--reference", str(root)]
        if subprocess.run(command, check=False).returncode != 0:
            return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Generate (or check, or exercise) the table; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m tui.sglang.flagtable.generate", description=__doc__)
    p.add_argument(
        "--sglang-version", default=PINNED_VERSION, choices=list(RELEASES), help="the release"
    )
    p.add_argument("--all", action="store_true", help="every release (with --install too)")
    p.add_argument("--reference", type=Path, help="the reference directory (default: the venv's)")
    p.add_argument("--install", action="store_true", help="fetch the reference(s), then stop")
    p.add_argument("--out", help="write the whole table there ('-': stdout) instead of shipping")
    p.add_argument(
        "--parse-cases", type=Path, help="JSON list of argv lists to parse; print results"
    )
    p.add_argument(
        "--parser",
        choices=("sglang", "table"),
        default="sglang",
        help="with --parse-cases: SGLang's own parser, or the one rebuilt from the shipped table",
    )
    args = p.parse_args(argv)
    version = args.sglang_version
    root = args.reference or sglang_reference_dir()
    if args.install:
        versions = list(RELEASES) if args.all else [version]
        try:
            install_reference(versions, root)
        except ReferenceError as exc:
            print(f"flagtable: {exc}", file=sys.stderr)
            return 1
        print(f"SGLang {', '.join(versions)}: reference ready in {root}")
        return 0
    if args.all:
        return _generate_all(root)
    try:
        if args.parse_cases is not None:
            cases = json.loads(args.parse_cases.read_text())
            if args.parser == "table":
                table_parser = build_parser(load_table(version))
                results = run_cases(table_parser, cases, table_spec_error(version))
            else:
                parser = sglang_parser(version, root)
                if args.out not in (None, "-"):  # the table too, from the same import
                    table_text = build_table(version, root, parser).dumps()
                    replace_file(args.out, table_text.encode(), mode=0o644)
                results = run_cases(parser, cases, _sglang_spec_error)
            json.dump(results, sys.stdout)
            return 0
        table = build_table(version, root)
    except GeneratorError as exc:
        print(f"flagtable: {exc}", file=sys.stderr)
        return 1
    if args.out is not None:
        text = table.dumps()
        if args.out == "-":
            sys.stdout.write(text)
        else:
            replace_file(args.out, text.encode(), mode=0o644)
        return 0
    base = base_of(version)
    out = table_path(version)
    text = table.dumps(load_table(base) if base is not None else None)
    replace_file(out, text.encode(), mode=0o644)
    print(f"wrote {out}" + (f" (a delta of {base}'s table)" if base else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

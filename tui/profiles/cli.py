"""``gpufleet profile list | show NAME | diff A B | validate FILE | argv FILE|NAME --gpu N``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import tomli_w

from tui.cli_args import GPU_INDEX, ArgumentParser
from tui.paths import profiles_dir
from tui.profiles.diff import diff
from tui.profiles.errors import ProfileError
from tui.profiles.launch_args import argv_for, log_path_for
from tui.profiles.store import list_profiles, load_named, load_profile, profile_to_dict


def _parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="gpufleet profile", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="list the profiles in the profiles directory")
    show = sub.add_parser("show", help="print a profile as TOML, with each GPU's port and log")
    show.add_argument("name")
    d = sub.add_parser("diff", help="field-level differences from A to B")
    d.add_argument("a")
    d.add_argument("b")
    v = sub.add_parser("validate", help="check a profile file; exit 1 listing every problem")
    v.add_argument("file")
    a = sub.add_parser("argv", help="print the exact argv of one GPU's server as a JSON list")
    a.add_argument("name")
    a.add_argument("--gpu", type=GPU_INDEX, required=True)
    return parser


def _list() -> int:
    root = profiles_dir()
    if not root.is_dir():
        print(f"gpufleet profile list: {root} is not a directory of profiles", file=sys.stderr)
        return 2
    invalid = 0
    for path in list_profiles():  # the user's saved ones too
        try:
            p = load_profile(path)
            print(f"{p.name:<24} {p.engine.kind:<6} gpus={len(p.gpus)}  {p.note}")
        except ProfileError as exc:
            invalid += 1
            first = exc.problems[0]
            reason = first.message if first.field == "file" else str(first)
            more = f" (+{len(exc.problems) - 1} more)" if len(exc.problems) > 1 else ""
            print(f"{path.stem:<24} INVALID: {reason}{more}")
    return 1 if invalid else 0


def _run(args: argparse.Namespace) -> int:
    if args.command == "list":
        return _list()
    if args.command == "show":
        profile = load_named(args.name)
        print(tomli_w.dumps(profile_to_dict(profile)), end="")
        print("\n# per GPU: port, log")
        for gpu in profile.gpus:
            print(f"# gpu {gpu}: {profile.port_for(gpu)}  {log_path_for(profile, gpu)}")
        return 0
    if args.command == "diff":
        changes = diff(load_named(args.a), load_named(args.b))
        for change in changes:
            print(change)
        if not changes:
            print("no differences")
        return 0
    if args.command == "validate":
        profile = load_profile(args.file)
        print(f"{args.file}: ok ({profile.name}, {profile.engine.kind}, GPUs {list(profile.gpus)})")
        return 0
    profile = load_named(args.name)
    try:
        print(json.dumps(argv_for(profile, args.gpu)))
    except KeyError as exc:
        print(f"gpufleet profile: --gpu {args.gpu}: {exc.args[0]}", file=sys.stderr)
        return 2
    return 0


def main(argv: Sequence[str]) -> int:
    """Run ``gpufleet profile``; returns 1 when a profile is invalid (every problem printed; for
    ``list``, when any listed profile is), 2 on bad arguments."""
    args = _parser().parse_args(list(argv))
    try:
        return _run(args)
    except ProfileError as exc:
        print(f"gpufleet profile: {exc}", file=sys.stderr)
        return 1

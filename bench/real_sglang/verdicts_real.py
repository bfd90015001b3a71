"""gpufleet's verdicts held to a real SGLang server's throughput: a canary and an autotune on two
real servers sharing one GPU, beside the same knob grid measured directly.

Run on the GPU machine from the repository root (``bench/real_sglang/device_verdicts.sh`` sets
the environment), in ONE command of a few minutes; or here with ``--sim``, where simulated
0.5.17 servers (``gpufleet sim --sim-build 0.5.17``) take the real ones' place through the same
profiles, launches and stops (``bench/real_sglang/slots.py``). Each slot is fed by its own
closed-loop client (``bench/closed_loop.py --reconnect``: N ``/generate`` in flight, back on
the server once it answers again). In order, each phase cut short by ``--deadline-s``:

1. **the grid, directly**: slot 1 down, each setting launched on slot 0 alone and loaded
   alone: a warm-up, then ``--windows`` windows of ``--window-s``, each one rate (n >= 3).
   Max running {16, 64} x Mamba {80, 200}: (16, 80) runs the same batch as (16, 200) (an
   80-slot pool caps at 26, above 16) and is measured only with ``--full-grid``; (64, 80) is
   capped at 26 as the autotune's start is, so the start is measured in its place, last, and
   slot 0 stays on it;
2. **autotune** from (fraction 0.45, Mamba 80, ratio 0.4, max running auto) over max running
   {16, 64} x Mamba {80, 200}: slot 1 joins on the start, slot 0 is the canary GPU, a short
   wall budget (its first whole move and the rollout that adopts it); its pick, when not a
   grid point, is then measured on slot 0 alone (slot 1 stopped) as the grid's were;
3. **canary** of max running 64 against 16 (both Mamba 200): slot 1 on 16, the candidate on
   slot 0, ``FleetOps.canary`` with its sequential test, its interval and the load it read.

Then it compares: the canary's interval against the grid's difference of the same two
settings (does it cover it?), the autotune's pick against the grid's best (>= 0.97?). Writes
``OUT/results.json`` and ``OUT/results.md`` (for ``bench/results-real-sglang.md``); every
server log and the journal stay under ``OUT/state``.

usage: python -m bench.real_sglang.verdicts_real OUT MODEL_DIR [--sim] [--deadline-s S] ...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

from bench.real_sglang.slots import profile_text, slot_pids, write_launcher
from bench.real_sglang.verdicts_grid import (
    CANARY_PAIR,
    FULL_GRID_EXTRA,
    GRID,
    compare,
    key,
    knobs,
    label,
    markdown,
    measure_alone,
    t95,
)
from bench.simfleet import ROOT


class Run:
    """One run: its directory, clients, profiles and the operations door."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Path(args.out).resolve()
        self.started = time.monotonic()
        self.ports = (args.base_port, args.base_port + 1)
        self.state = self.out / "state"
        self.state.mkdir(parents=True, exist_ok=True)
        self.launcher = write_launcher(self.out / "slot-python", 0, args.sim, args.sim_speed)
        self.record: dict[str, Any] = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "card": card(),
            "sim": args.sim,
            "phases": {},
        }
        self.clients: list[subprocess.Popen[bytes]] = []
        self.serial = 0
        self.start_profile: Any = None
        """The autotune's start (its profile: slot 0 measures it alone, then slot 1 joins)."""

    def left(self) -> float:
        """Seconds left before the deadline."""
        return self.args.deadline_s - (time.monotonic() - self.started)

    def say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}] {text}", flush=True)

    def profile(self, setting: dict[str, Any]) -> Any:
        """The two-slot profile of ``setting`` (a fresh name each time: a canary's candidate
        and the fleet's profile are told apart by name)."""
        from tui.profiles import load_profile

        self.serial += 1
        name = f"v{self.serial}-{label(setting).replace(', ', '-').replace(' ', '')}"
        path = self.out / "profiles" / f"{name}.toml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(
            profile_text(
                name,
                knobs(setting),
                launcher=self.launcher,
                model=self.args.model,
                ports=self.ports,
                log_dir=self.state / "logs",
            )
        )
        return load_profile(path)

    def ops(self) -> Any:
        """The operations door, its stops quick (the clients keep sending through a drain)."""
        from tui.control.stop_release import StopTimeouts
        from tui.ops.service import FleetOps, OpsOptions
        from tui.retune.options import ApplyOptions

        apply = ApplyOptions(timeout_s=240, release_timeout_s=60, measure=False)
        stop = StopTimeouts(drain_s=3.0, kill_s=5.0, release_s=60.0)
        return FleetOps(
            options=OpsOptions(apply=apply, stop=stop, canary=self.canary_options()),
            by="verdicts-real",
            gpu_pids=slot_pids(),
        )

    def canary_options(self) -> Any:
        from tui.retune.options import ApplyOptions
        from tui.rollout.canary import CanaryOptions

        a = self.args
        return CanaryOptions(
            window_s=a.canary_window_s,
            warmup_s=a.warmup_s,
            max_window_s=2 * a.canary_window_s,
            interval_s=a.interval_s,
            min_intervals=4,
            margin=0.03,
            baseline_s=2 * a.interval_s,
            settle_s=0.0,
            apply=ApplyOptions(timeout_s=240, release_timeout_s=60, measure=False),
        )

    # -- the clients ---------------------------------------------------------------------
    def start_clients(self) -> None:
        for port in self.ports:
            argv = [sys.executable, "-m", "bench.closed_loop", str(port), "--reconnect"]
            argv += ["--clients", str(self.args.clients), "--max-new", str(self.args.max_new)]
            argv += ["--out", str(self.out / f"client-{port}.json")]
            argv += ["--stop-file", str(self.out / "stop-clients")]
            self.clients.append(subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL))

    def stop_clients(self) -> None:
        (self.out / "stop-clients").touch()
        for client in self.clients:
            try:
                client.wait(timeout=60)
            except subprocess.TimeoutExpired:
                client.kill()
                client.wait()

    # -- the phases ----------------------------------------------------------------------
    async def fleet_on(
        self, ops: Any, setting: dict[str, Any], slots: tuple[int, ...], profile: Any = None
    ) -> Any:
        """``setting`` (``profile``, when given) on ``slots``, one after the other (slot 1's
        fraction leaves slot 0's share only when slot 0 holds its own when it starts)."""
        profile = profile or self.profile(setting)
        for slot in slots:
            result = await ops.apply(profile, [slot], measure=False, mode="terminate")
            if not result.ok:
                raise RuntimeError(f"slot {slot} did not come up on {label(setting)}: {result}")
            report = result.reports[0]
            self.say(
                f"slot {slot} on {label(setting)}: ready in {report.time_to_ready_s or 0:.1f} s, "
                f"max running {report.effective.max_running_requests}, "
                f"Mamba {report.effective.mamba_slots}"
            )
        return profile

    async def autotune(self, ops: Any) -> dict[str, Any]:
        from tui.autotune.budget import Budget
        from tui.autotune.options import AutotuneOptions
        from tui.autotune.search import Autotuner
        from tui.autotune.space import SearchSpace
        from tui.rollout.fleet_verdict import VerdictWindows
        from tui.rollout.rollout import RolloutOptions

        await self.fleet_on(ops, {}, (1,), self.start_profile)
        space = SearchSpace(
            (("max_mamba_cache_size", (80, 200)), ("max_running_requests", (16, 64)))
        )
        options = AutotuneOptions(
            space=space,
            budget=Budget(wall_s=self.args.autotune_wall_s, explore_gpu_s=1e6, max_regression=0.5),
            gpu=0,
            canary=self.canary_options(),
            rollout=RolloutOptions(
                apply=ops.options.apply,
                interval_s=1.0,
                baseline_s=0.0,
                settle_s=0.0,
                verdict=VerdictWindows(window_s=0),
            ),
            poll_s=0.5,
            mean_output_tokens=self.args.max_new,
        )
        result = await Autotuner(ops, options).run()
        final = ops.profile_for(0)
        pick = {
            k: getattr(final.server, k) for k in ("max_running_requests", "max_mamba_cache_size")
        }
        self.say(f"autotune: {result.reason}; pick {label(pick)}")
        return {
            "reason": result.reason,
            "phase": result.phase,
            "pick": pick,
            "records": [r.to_json() for r in result.records],
            "spent": asdict(result.spent),
        }

    async def canary(self, ops: Any) -> dict[str, Any]:
        candidate, control = CANARY_PAIR
        await self.fleet_on(ops, control, (1,))
        result = await ops.canary(self.profile(candidate), 0, controls=[1])
        self.say("canary: " + result.describe().replace("\n", "; "))
        t = result.tokens
        return {
            "candidate": label(candidate),
            "control": label(control),
            "verdict": result.verdict,
            "reason": result.reason,
            "describe": result.describe(),
            "relative": None if t is None else t.relative,
            "rel_low": None if t is None else t.rel_low,
            "rel_high": None if t is None else t.rel_high,
            "level": None if t is None else t.level,
            "canary_tok_s": None if t is None else t.canary_mean,
            "control_tok_s": None if t is None else t.control_mean,
            "load": None if result.load is None else asdict(result.load),
            "window_s": result.window_s,
        }

    async def grid(self, ops: Any) -> list[dict[str, Any]]:
        """Each grid setting on slot 0 alone, the start last (slot 0 stays on it)."""
        await stop_slot(ops, 1)
        extra = FULL_GRID_EXTRA if self.args.full_grid else ()
        # The autotune's start is measured only for the autotune; what the later phases need
        # is kept back from the grid (the start, autotune and canary: 300 s; the canary: 120 s).
        tuning = "autotune" in self.args.phases
        start: tuple[dict[str, Any], ...] = ({},) if tuning else ()
        reserve = 300.0 if tuning else 120.0 if "canary" in self.args.phases else 0.0
        points = []
        for setting in (*GRID, *extra, *start):
            if not setting:
                self.start_profile = self.profile({})
            per_point = 45.0 + self.args.warmup_s + self.args.windows * self.args.window_s
            if setting and self.left() < per_point + reserve:
                self.say(f"grid: {label(setting)} skipped ({self.left():.0f} s left)")
                points.append({"setting": setting, "label": label(setting), "skipped": True})
                continue
            await self.fleet_on(ops, setting, (0,), None if setting else self.start_profile)
            points.append(await self.alone(setting))
        return points

    async def alone(self, setting: dict[str, Any]) -> dict[str, Any]:
        """Slot 0, alone on the GPU, measured: a warm-up, then the windows."""
        a = self.args
        rates, loads = await asyncio.to_thread(
            measure_alone, self.ports[0], a.warmup_s, a.windows, a.window_s
        )
        mean = fmean(rates)
        half = t95(len(rates)) * stdev(rates) / len(rates) ** 0.5 if len(rates) > 1 else None
        self.say(f"alone {label(setting)}: {[round(r) for r in rates]} tok/s")
        return {
            "setting": setting,
            "label": label(setting),
            "rates": [round(r, 1) for r in rates],
            "mean": round(mean, 1),
            "ci95_half": None if half is None else round(half, 1),
            "load": loads,
        }

    async def pick_alone(self, ops: Any) -> dict[str, Any] | None:
        """The autotune's pick on slot 0 alone (slot 1 stopped), when no grid point ran it."""
        pick = (self.record.get("autotune") or {}).get("pick")
        measured = {key(p["setting"]) for p in self.record.get("grid", []) if "mean" in p}
        if pick is None or key(pick) in measured:
            return None
        await stop_slot(ops, 1)
        return await self.alone(pick)


async def stop_slot(ops: Any, slot: int) -> None:
    """Stop ``slot``'s server, if one is recorded (at the start none is)."""
    from tui.state.fleet_state import read_records

    if slot in await asyncio.to_thread(read_records):
        await ops.kill([slot], mode="terminate")


def card() -> str:
    """The GPU, as nvidia-smi names it (or 'none: simulated')."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20, check=False,
        )  # fmt: skip
        return done.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "none (simulated run)"


async def main_async(run: Run) -> None:
    if run.args.sim:
        _simulated_card()
    ops = run.ops()
    run.start_clients()
    try:
        began = time.monotonic()
        run.record["grid"] = await run.grid(ops)
        run.record["phases"]["grid"] = round(time.monotonic() - began, 1)
        save(run)
        # (phase, the --phases word that asks for it, seconds it needs)
        for phase, asked, needs in (
            ("autotune", "autotune", 150.0),
            ("pick_alone", "autotune", 30.0),
            ("canary", "canary", 120.0),
        ):
            if asked not in run.args.phases:
                continue
            if run.left() < needs:
                run.say(f"{phase}: skipped ({run.left():.0f} s left)")
                continue
            began = time.monotonic()
            done = await getattr(run, phase)(ops)
            if phase == "pick_alone":
                if done is not None:
                    run.record["grid"].append(done)
            else:
                run.record[phase] = done
            run.record["phases"][phase] = round(time.monotonic() - began, 1)
            save(run)
    finally:
        run.stop_clients()
        try:
            await asyncio.wait_for(ops.stop_fleet(mode="terminate"), 120)
        except Exception as exc:  # recorded: the teardown is the run's last word
            run.say(f"stop: {type(exc).__name__}: {exc}")
        run.record["comparison"] = compare(run.record)
        save(run)


def _simulated_card() -> None:
    """Without a driver the planner cannot ask NVML for the card: the simulated H100's."""
    import tui.retune.preflight as preflight
    from tui.gpu.sim_records import SIM_GPU_KINDS

    total = SIM_GPU_KINDS["h100"][1]
    preflight.gpu_capacity = lambda index: total  # type: ignore[assignment]  # the stand-in card


def save(run: Run) -> None:
    (run.out / "results.json").write_text(json.dumps(run.record, indent=1, default=str))
    (run.out / "results.md").write_text(markdown(run.record))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.real_sglang.verdicts_real")
    parser.add_argument("out")
    parser.add_argument("model", help="the tiny model's folder (make_tiny.py)")
    parser.add_argument("--sim", action="store_true", help="simulated 0.5.17 servers")
    parser.add_argument("--sim-speed", type=float, default=1.0)
    parser.add_argument("--deadline-s", type=float, default=500.0)
    parser.add_argument("--base-port", type=int, default=30000)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--max-new", type=int, default=128)
    parser.add_argument("--warmup-s", type=float, default=6.0)
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--window-s", type=float, default=5.0)
    parser.add_argument("--interval-s", type=float, default=2.0)
    parser.add_argument("--canary-window-s", type=float, default=10.0)
    parser.add_argument("--autotune-wall-s", type=float, default=60.0)
    parser.add_argument("--full-grid", action="store_true", help="(16, 80) too")
    parser.add_argument(
        "--phases",
        type=lambda text: tuple(text.split(",")),
        default=("autotune", "canary"),
        help="after the grid: autotune,canary (default), or either alone (canary: the grid "
        "measures the canary's two settings only, a call of about five minutes)",
    )
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    # gpufleet's state (journal, fleet state, locks) in the run's directory, before any use
    os.environ["GPUFLEET_STATE_DIR"] = str(out / "state")
    run = Run(args)
    asyncio.run(main_async(run))
    print((run.out / "results.md").read_text(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

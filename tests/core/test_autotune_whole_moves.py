"""Whole moves: the knobs an expert turns together, judged by the preflight as one move, tried
first (``tui.autotune.jumps``). The climb is played against the simulator's own model (each
canary's verdict drawn from the model's rates with a noisy window; no servers): from the seed's
baseline over the default space it must find what the seed's operator found and more, in its
first canary, where the single-knob climb spent its canaries on +27% steps a noisy window could
not tell apart."""

from __future__ import annotations

import random

import pytest
from repo_paths import ROOT
from ui_helpers import verify_report

from tui.autotune.jumps import whole_moves
from tui.autotune.options import AutotuneOptions
from tui.autotune.search import Autotuner
from tui.autotune.space import Candidate, SearchSpace, candidate_profile, knobs_of
from tui.autotune.strategy import Ranked, apply_move, held_batch, rank
from tui.autotune.trials import Trial
from tui.ops.service import FleetOps
from tui.profiles import Profile, load_profile
from tui.retune.preflight import Preflight, model_for, preflight
from tui.rollout.canary_result import CanaryResult
from tui.rollout.stats import paired
from tui.sim.throughput import expected_rate

BASE = load_profile(ROOT / "profiles" / "sim-baseline.toml")
AGGRESSIVE = load_profile(ROOT / "profiles" / "sim-aggressive.toml")
MODEL = model_for(BASE, 0)


def modelled(profile: Profile) -> float:
    """The simulator's output tokens/s of ``profile`` on one GPU (0 when it does not start)."""
    pre = preflight(profile, 0)
    return expected_rate(pre.plan, MODEL).output_tokens_per_s if pre.fits else 0.0


async def test_a_whole_move_sets_the_pool_and_the_fraction_a_batch_needs() -> None:
    space = SearchSpace.default()
    knobs = knobs_of(BASE, space)
    current = preflight(BASE, 0)
    assert current.max_running_effective == 16  # 80 slots, 5 a request

    def predicted(move: Candidate) -> Preflight:
        return preflight(candidate_profile(BASE, move, "p"), 0)

    async def predict(move: Candidate) -> Preflight | None:
        return predicted(move)

    moves = await whole_moves(space, knobs, current, predict, 2500)
    by_batch = {int(m.as_dict()["max_running_requests"]): m.as_dict() for m in moves}
    # 64 running: 320 slots, and 0.88 already holds their half outputs in its KV pool
    assert by_batch[64] == {"max_mamba_cache_size": 320, "max_running_requests": 64}
    # 72 running: 360 slots leave 0.88 too little KV (about 23 held); 0.91 holds them
    assert by_batch[72] == {
        "mem_fraction_static": 0.91,
        "max_mamba_cache_size": 360,
        "max_running_requests": 72,
    }
    # 80 running: 400 slots with 3 speculative steps fit only at 0.93, on 704 KV tokens
    assert 80 not in by_batch
    ranked = rank([(m, predicted(m)) for m in moves])
    assert ranked[0].candidate.as_dict()["max_running_requests"] == 72
    assert held_batch(ranked[0].prediction, 2500) == 72


class Modelled(Autotuner):
    """The search with each canary answered by the simulator's model over a noisy window, the
    walks back and rollouts taken as done (no servers, no journal of canaries)."""

    noise = 0.2
    """Each interval's rate off by this much (relative sd), canary and control alike."""

    def __init__(self) -> None:
        super().__init__(FleetOps(by="autotune"), AutotuneOptions(gpu=0))
        self.launched: list[Candidate] = []
        self._rng = random.Random(3)

    def _fleet(self) -> tuple[list[int], Profile]:
        self.gpu = 0
        return [0, 1], BASE

    async def _canary(self, profile: Profile, controls: list[int]) -> tuple[CanaryResult, bool]:
        assert self.incumbent is not None and self.current is not None
        self.launched.append(Candidate.of(self.current.knobs))
        mine, theirs = modelled(profile), modelled(self.incumbent)
        canary = [mine * (1 + self._rng.gauss(0, self.noise)) for _ in range(12)]
        control = [theirs * (1 + self._rng.gauss(0, self.noise)) for _ in range(12)]
        tok = paired(canary, control, 0.995)
        assert tok is not None
        verdict = (
            "better"
            if tok.rel_low > 0
            else "worse"
            if tok.rel_high < 0
            else "no measurable difference"
        )
        report = verify_report(0, profile.name)
        result = CanaryResult(
            profile.name,
            0,
            (1,),
            self.incumbent.name,
            verdict,
            "",
            tok,
            None,
            report=report,
            window_s=60.0,
        )
        return result, False

    async def _back_to(self, profile: Profile, gpus: list[int] | None = None) -> None:
        return None

    async def _adopt(self, trial: Trial) -> str | None:
        assert isinstance(trial.move, Ranked)
        self.incumbent = trial.profile
        self.knobs = apply_move(self.knobs, trial.move.candidate)
        self.measured = []
        await self._finish(trial.record, "kept", "adopted")
        return None

    async def _status(self) -> None:
        return None


@pytest.mark.timeout(120)
async def test_from_the_seed_baseline_the_first_canary_is_the_whole_move() -> None:
    tuner = Modelled()
    result = await tuner._run(None)
    assert tuner.incumbent is not None
    first = tuner.launched[0].as_dict()
    assert first == {
        "mem_fraction_static": 0.91,
        "max_mamba_cache_size": 360,
        "max_running_requests": 72,
    }, result.records
    kept = [r for r in result.records if r.decision == "kept"]
    assert kept and kept[0].key == tuner.launched[0].key()
    # where it ends runs at least as fast as the seed's aggressive retune (+63%), by the model
    final, aggressive = modelled(tuner.incumbent), modelled(AGGRESSIVE)
    assert final >= aggressive, (final, aggressive, result.reason)
    assert "regression budget" not in result.reason

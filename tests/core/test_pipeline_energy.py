"""The job's energy: metered while the job runs, kept beside its status document across runs
(a resumed job adds to its own ledger, a new job starts anew), tokens per joule over every run,
and its cost at the operator's price; and a real run on a simulated GPU writes it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pipeline_helpers import generate_argv, run_generate, sim_server, started, write_prompts

from tui.gpu.snapshot import GpuSlowSnapshot, GpuSnapshot, GpuSourceKind
from tui.pipeline.energy import (
    JOULES_PER_KWH,
    JobCost,
    JobEnergy,
    JobMeter,
    Price,
    PriceError,
    job_cost,
    ledger_path,
    load_price,
    read_ledger,
)
from tui.pipeline.status import read_status


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Gpus:
    """Two GPUs at scripted power; the first has an energy counter, the second none."""

    kind: GpuSourceKind = "sim"

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.watts = [500.0, 300.0]
        self.counter_mj = 9_000_000

    def advance(self, seconds: float) -> None:
        self.counter_mj += round(self.watts[0] * seconds * 1000)
        self.clock.now += seconds

    def sample(self) -> tuple[GpuSnapshot, ...]:
        return tuple(self._gpu(i, watts) for i, watts in enumerate(self.watts))

    def _gpu(self, index: int, watts: float) -> GpuSnapshot:
        unknown: dict[str, Any] = dict.fromkeys(
            ("utilization_gpu", "utilization_memory", "temperature_c", "power_limit_w",
             "sm_clock_mhz", "mem_clock_mhz"),
        )  # fmt: skip
        return GpuSnapshot(index, "GPU", f"u{index}", 1, 0, 1, power_w=watts,
                           taken_at=self.clock.now, **unknown)  # fmt: skip

    def sample_slow(self) -> tuple[GpuSlowSnapshot, ...]:
        return (
            GpuSlowSnapshot(0, energy_mj=self.counter_mj, taken_at=self.clock.now),
            GpuSlowSnapshot(1, energy_mj=None, taken_at=self.clock.now),
        )

    def describe(self) -> str:
        return "two scripted GPUs"

    def close(self) -> None:
        pass


def run(path: Path, job: str, clock: Clock, seconds: int, tokens_per_s: int) -> JobEnergy:
    gpus = Gpus(clock)
    meter = JobMeter(path, job, gpus, clock)
    ledger = meter.sample(0)
    for step in range(1, seconds // 5 + 1):
        gpus.advance(5.0)
        ledger = meter.sample(step * 5 * tokens_per_s)
    return ledger


def test_the_ledger_adds_runs_of_one_job_and_starts_anew_for_another(tmp_path: Path) -> None:
    path = ledger_path(tmp_path / "status.json")
    assert path == tmp_path / "status.energy.json"
    clock = Clock()
    first = run(path, "job-a", clock, 100, tokens_per_s=1600)
    # 100 s at 500 W (the counter) + 300 W (the power samples): 80 kJ for 160,000 tokens.
    assert first.joules == pytest.approx(80_000.0)
    assert (first.output_tokens, first.runs, first.gpus) == (160_000, 1, 2)
    assert first.counter is False  # the second GPU has no counter: said so
    assert first.watts == pytest.approx(800.0)
    assert first.tokens_per_joule == pytest.approx(2.0)
    assert read_ledger(path) == first
    clock.now += 3_600  # the job stopped for an hour: nothing metered meanwhile
    second = run(path, "job-a", clock, 50, tokens_per_s=800)
    assert second.joules == pytest.approx(120_000.0) and second.runs == 2
    assert second.output_tokens == 160_000 + 40_000
    other = run(path, "job-b", clock, 10, tokens_per_s=100)
    assert other.runs == 1 and other.joules == pytest.approx(8_000.0)


def test_the_cost_so_far_and_to_the_eta(tmp_path: Path) -> None:
    ledger = JobEnergy(1, "j", 2 * JOULES_PER_KWH, 10, 1, 7, True, 1500.0, 0.0)
    # pytest.approx stands in for each float on purpose: it compares equal to one near it
    assert job_cost(ledger, Price(0.25, "EUR"), eta_s=7200) == JobCost(
        pytest.approx(0.5),  # type: ignore[arg-type]
        pytest.approx(0.75),  # type: ignore[arg-type]
        "EUR",
    )
    assert job_cost(ledger, Price(0.25), eta_s=None).to_eta is None


def test_the_price_is_read_from_the_settings_and_bad_values_named(tmp_path: Path) -> None:
    settings = tmp_path / "settings.toml"
    assert load_price(settings) is None  # no file: no price
    settings.write_text(
        '[console]\nreadonly = true\n[energy]\nprice_per_kwh = 0.31\ncurrency = "CHF"\n'
    )
    assert load_price(settings) == Price(0.31, "CHF")
    for text, words in (
        ("[energy]\nprice_per_kwh = -1\n", "energy.price_per_kwh = -1: must be a number in 0..100"),
        ('[energy]\nprice_per_kwh = "x"\n', "energy.price_per_kwh = 'x'"),
        ("[energy]\nprice = 1\n", "energy.price is not a setting"),
        ("[energy]\nprice_per_kwh = 1\ncurrency = 3\n", "energy.currency = 3"),
    ):
        settings.write_text(text)
        with pytest.raises(PriceError, match="^" + str(settings).replace(".", r"\.")) as error:
            load_price(settings)
        assert words in str(error.value) and "\n" not in str(error.value)


def test_a_run_on_a_simulated_gpu_writes_its_ledger(tmp_path: Path) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", 300)
    for server in started(sim_server(0)):
        argv = generate_argv(tmp_path, "--prompts", str(prompts), "--server", server.url)
        result = run_generate(argv)
        assert result.returncode == 0, result.stderr
    status = read_status(tmp_path / "status.json")
    ledger = read_ledger(tmp_path / "status.energy.json")
    assert status is not None and status.state == "finished"
    assert ledger is not None and ledger.runs == 1 and ledger.gpus >= 1
    assert ledger.counter  # the simulated driver's energy counter
    assert ledger.joules > 0
    assert ledger.output_tokens == sum(s.output_tokens for s in status.servers) > 0

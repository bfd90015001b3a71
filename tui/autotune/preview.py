"""The preflight's verdict of a search space before the search starts (the console's form shows
it as the operator types).

The search moves one knob at a time from the fleet's profile (``tui.autotune.strategy``), and
never launches a move the preflight predicts will not fit. The preview predicts every value of
every knob of the space as such a move from the running profile, on the canary GPU, calibrated
on the running servers' logs as the search's own preflights are: "3 of 21 predicted not to
fit" tells the operator, before anything restarts, how much of the range is out of reach. (The
search's later rounds start from a new incumbent, so their predictions can differ.)

Blocking (it reads the fleet state and the logs): call it from a thread.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.autotune.fleet import searchable_fleet
from tui.autotune.space import Candidate, SearchSpace, candidate_profile, knobs_of
from tui.fleet.log_paths import server_logs
from tui.ops.fit import fit_to_fleet
from tui.profiles import Profile, ProfileError
from tui.retune.calibration import CalibrationCache
from tui.retune.preflight import preflight
from tui.state.fleet_state import profile_of, read_fleet

SHOWN = 3
"""Rejected moves named in the verdict's line (the rest are counted)."""


@dataclass(frozen=True, slots=True)
class RangeVerdict:
    """What the preflight says of a space's single-knob moves from the running profile."""

    gpu: int
    """The canary GPU it predicted on."""
    incumbent: str
    """The running profile the moves start from."""
    moves: int
    """Moves predicted (values other than the running one)."""
    rejected: tuple[str, ...]
    """Each move predicted not to fit or not to start, with why ('knob=value: why')."""

    def describe(self) -> str:
        """One line: '2 of 19 moves from P predicted not to fit (never launched): ...'."""
        head = (
            f"Preflight on GPU {self.gpu}: {len(self.rejected)} of {self.moves} single-knob "
            f"moves from {self.incumbent} predicted not to fit"
        )
        if not self.rejected:
            return head + "."
        more = len(self.rejected) - SHOWN
        named = "; ".join(_short(r) for r in self.rejected[:SHOWN])
        named += f"; and {more} more" if more > 0 else ""
        return f"{head} (never launched): {named}"


def _short(text: str, limit: int = 110) -> str:
    """A rejection in a few words: its first sentence, cut at ``limit`` characters."""
    first = text.split(". ", 1)[0]
    return first if len(first) <= limit else first[: limit - 3] + "..."


class RangePreview:
    """Predicts spaces against the running fleet (the fleet is read once, the logs followed).

    Args:
        gpu: The canary GPU (None: the lowest running GPU, as the search picks).
    """

    def __init__(self, gpu: int | None = None) -> None:
        self.gpu = gpu
        self._calibrations = CalibrationCache()
        self._base: tuple[int, Profile] | None = None

    def _fleet(self) -> tuple[int, Profile]:
        if self._base is None:
            _, gpu, doc = searchable_fleet(self.gpu)
            self._base = (gpu, fit_to_fleet(profile_of(doc), read_fleet(), None))
        return self._base

    def verdict(self, space: SearchSpace) -> RangeVerdict:
        """Predict every value of every knob of ``space`` as a move from the running profile.

        Raises:
            SearchRefused: the fleet cannot be searched (too few GPUs, mixed profiles).
            StateFileError: the fleet state is damaged.
        """
        gpu, incumbent = self._fleet()
        logs = server_logs(incumbent, [gpu], read_fleet())  # the log the console reads
        calibration = self._calibrations.get(logs[gpu]) if gpu in logs else None
        current = knobs_of(incumbent, space)
        moves, rejected = 0, []
        for knob, values in space.values:
            for value in values:
                if current.get(knob) == value:
                    continue
                moves += 1
                move = Candidate.of({knob: value})
                try:
                    profile = candidate_profile(incumbent, move, f"{incumbent.name}-preview")
                except (ProfileError, ValueError) as exc:
                    rejected.append(f"{move.key()}: {' '.join(str(exc).split())}")
                    continue
                predicted = preflight(profile, gpu, calibration=calibration)
                if not predicted.fits:
                    rejected.append(f"{move.key()}: {predicted.why_not or 'does not fit'}")
        return RangeVerdict(gpu, incumbent.name, moves, tuple(rejected))

"""What the console's tuning form asks the core: the profiles that can run, the one running, a
save, and the preflight calibrated on the running servers' logs (the logs the console reads).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path

from tui import paths
from tui.fleet.log_paths import server_logs
from tui.ops.door import OpsBase
from tui.profiles import Profile, list_profiles, profile_engine, save_profile
from tui.retune.preflight import Preflight, predict_walk
from tui.sglang.memory import Calibration
from tui.state.fleet_state import read_fleet


class FormOps(OpsBase):
    """Profiles and predictions for the console's tuning form (nothing is stopped)."""

    # --- profiles and predictions (for the console's form) --------------------------------------

    def profile_names(self) -> list[str]:
        """Names of the saved and shipped profiles whose engine is the fleet's. Blocking."""
        kind = self.base.engine.kind if self.base is not None else None
        # Only what can run on this fleet: a real-SGLang profile on a simulated fleet (or the
        # other way round) is not offered.
        return [p.stem for p in list_profiles() if kind is None or profile_engine(p) == kind]

    def current_profile(self) -> str | None:
        """The profile most of the fleet's GPUs run now (the fleet's when nothing is recorded)."""
        state = read_fleet()
        gpus = self.base.gpus if self.base is not None else tuple(state)
        names = [n for g in gpus if g in state and (n := state[g].current_name)]
        if not names:
            return self.base.name if self.base is not None else None
        return max(set(names), key=names.count)

    def save_profile(self, profile: Profile) -> Path:
        """Write ``profile`` as ``<user profiles dir>/<name>.toml`` (``paths.user_profiles_dir``:
        the user's configuration, never the source tree); returns the path. Blocking."""
        return save_profile(profile, paths.user_profiles_dir() / f"{profile.name}.toml")

    async def preflight(
        self,
        profile: Profile,
        gpus: Sequence[int],
        logs: Mapping[int, str] | None = None,
    ) -> list[Preflight]:
        """Predicted allocation of ``profile`` on each GPU, calibrated on the running servers'
        logs as the console finds them (``tui.fleet.log_paths``). Nothing is stopped.

        Args:
            profile: the candidate, fitted to the fleet.
            gpus: GPUs of the profile.
            logs: the logs the console's monitor follows, by GPU (the others are looked for).

        Raises:
            ValueError: a GPU outside the profile, or a model whose size is unknown.
        """
        return await asyncio.to_thread(self._preflight, profile, tuple(gpus), logs)

    def _preflight(
        self, profile: Profile, gpus: tuple[int, ...], logs: Mapping[int, str] | None
    ) -> list[Preflight]:
        for gpu in gpus:
            if gpu not in profile.gpus:
                raise ValueError(
                    f"gpus: GPU {gpu} is not in profile {profile.name!r} "
                    f"(allowed: {list(profile.gpus)})"
                )
        found = server_logs(profile, gpus, read_fleet(), logs)
        card = self.options.card_bytes

        def calibration(gpu: int) -> Calibration | None:
            return self._calibrations.get(found[gpu]) if gpu in found else None

        items = []
        for _gpu, item, why in predict_walk(profile, gpus, calibration, card):
            if item is None:
                raise ValueError(why)
            items.append(item)
        return items

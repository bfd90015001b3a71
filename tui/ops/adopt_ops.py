"""Adopting a running fleet through the one door: the operation lock, the write, the journal."""

from __future__ import annotations

import asyncio
import time

from tui.ops.adoption import (
    Adoptee,
    AdoptError,
    AdoptPlan,
    AdoptRequest,
    plan_adoption,
    write_adoption,
)
from tui.ops.door import OpsBase
from tui.ops.entries import simple_entry
from tui.ops.events import EventSink


class AdoptOps(OpsBase):
    """Take over servers gpufleet did not launch (``gpufleet adopt``, the console's ``A``)."""

    async def plan_adoption(self, request: AdoptRequest) -> AdoptPlan:
        """What adopting ``request`` would write (reads only; nothing is signalled).

        Raises:
            AdoptError: bad input or a port that cannot be adopted (one line naming it).
            StateFileError: the fleet state is damaged.
        """
        return await asyncio.to_thread(plan_adoption, request)

    async def adopt(self, plan: AdoptPlan, on_event: EventSink | None = None) -> AdoptPlan:
        """Write ``plan``'s profile and record its servers as the fleet's; journalled.

        Nothing is signalled: the servers keep serving. Afterwards every operation acts on them
        (verified by start ticks, boot and command line digest, ``tui.control.identity``).

        Raises:
            OperationBusy: another operation holds the fleet.
            AdoptError: a server is no longer the one that was read, or the name was taken
                meanwhile (nothing written; the refusal is journalled).
        """
        gpus = tuple(a.gpu for a in plan.adoptees)
        what = f"adopt {plan.summary()}"
        async with self._operation(what, gpus, on_event):
            started = time.time()
            try:
                await asyncio.to_thread(write_adoption, plan)
            except AdoptError as refused:
                await self._journal_refusal(what, gpus, refused)
                raise
            entry = simple_entry(
                "adopt",
                started,
                time.time(),
                True,
                gpus,
                self.by,
                f"adopted {plan.summary()}; nothing was signalled",
                target=plan.profile.name,
                detail={
                    "servers": [_server_detail(a) for a in plan.adoptees],
                    "profile_file": str(plan.path),
                    "not_kept": list(plan.not_kept),
                },
            )
            await self._journal(entry, on_event, what)
        return plan


def _server_detail(adoptee: Adoptee) -> dict[str, object]:
    server = adoptee.server
    return {
        "gpu": adoptee.gpu,
        "port": server.port,
        "pid": server.pid,
        "cmdline": list(server.cmdline),
        "log": adoptee.log_path,
    }


__all__ = ["AdoptError", "AdoptOps", "AdoptPlan", "AdoptRequest"]

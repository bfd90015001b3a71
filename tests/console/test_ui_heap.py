"""The console freezes its start-up heap once its first snapshot is drawn (``freeze_heap``,
set by the console's command): the garbage collector's full collections then skip the ~100k
long-lived objects. Apps built without the flag (every other test) freeze nothing."""

from __future__ import annotations

import gc

from ui_helpers import make_app, settle, seven_gpu_fleet, wait_for


async def test_the_first_snapshot_freezes_the_start_up_heap_once() -> None:
    gc.unfreeze()
    app = make_app(seven_gpu_fleet())
    app.freeze_heap = True
    try:
        async with app.run_test(size=(200, 50)) as pilot:
            await settle(pilot, app)
            await wait_for(pilot, lambda: gc.get_freeze_count() > 0, "the heap frozen")
            assert not app.freeze_heap  # once: later snapshots freeze nothing more
            frozen = gc.get_freeze_count()
            assert frozen > 10_000, frozen  # the app's widgets, styles and modules
    finally:
        gc.unfreeze()  # this process runs other tests


async def test_an_app_without_the_flag_freezes_nothing() -> None:
    gc.unfreeze()
    app = make_app(seven_gpu_fleet())
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.pause()
        assert gc.get_freeze_count() == 0

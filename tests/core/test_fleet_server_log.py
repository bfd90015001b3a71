"""The monitor's per-server log state: only the current launch counts, rotation starts it over."""

from __future__ import annotations

from pathlib import Path

from tui.fleet.server_log import ServerLog

STAMP = "[2026-04-05 20:02:51] "
ARGS = STAMP + "server_args=ServerArgs(model_path='m', max_running_requests=64, port=30000)"
KV = (
    STAMP + "KV Cache is allocated. dtype: torch.bfloat16, #tokens: {n}, K size: 1 GB, V size: 1 GB"
)
OOM = STAMP + "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
DECODE = (
    STAMP + "Decode batch, #running-req: {r}, #token: 100, token usage: 0.10, cuda graph: True, "
    "gen throughput (token/s): 50.00, #queue-req: 0"
)
READY = STAMP + "The server is fired up and ready to roll!"


def _write(path: Path, *lines: str, mode: str = "a") -> None:
    with path.open(mode) as out:
        out.write("".join(line + "\n" for line in lines))


def test_a_new_launch_in_the_same_chunk_forgets_the_old_one(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    _write(log, ARGS, KV.format(n=111), OOM, DECODE.format(r=7), ARGS, KV.format(n=222))
    follower = ServerLog(log)
    view = follower.poll()
    assert follower.launches == 1  # the first launch was cut before parsing
    assert view.kv_tokens == 222
    assert view.running is None  # the decode line belonged to the previous launch
    assert not view.failed and view.last_error is None
    assert len(view.allocation_lines) == 1 and "#tokens: 222" in view.allocation_lines[0]
    _write(log, DECODE.format(r=9), READY)
    view = follower.poll()
    assert (view.running, view.ready) == (9, True)
    follower.close()


def test_rotation_starts_over_before_the_new_server_writes(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    _write(log, ARGS, KV.format(n=111), READY)
    follower = ServerLog(log)
    assert follower.poll().ready
    log.rename(tmp_path / "s.log.1")
    _write(log, mode="w")  # the relaunch's fresh, still empty file
    view = follower.poll()
    assert not view.ready and view.kv_tokens is None and view.allocation_lines == ()
    _write(log, ARGS, KV.format(n=333))
    view = follower.poll()
    assert view.kv_tokens == 333 and follower.launches == 2
    follower.close()


def test_missing_log_is_empty(tmp_path: Path) -> None:
    follower = ServerLog(tmp_path / "nothing.log")
    view = follower.poll()
    assert view.phase == "" and not view.ready and follower.launches == 0

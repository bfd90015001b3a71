"""Closed-loop load on one SGLang server: N workers each keep one ``/generate`` in flight.

    python bench/real_sglang/load_client.py PORT OUT.json STOPFILE N MAX_NEW [SECONDS]

The operator's own generation script, as the seed's is: it never reads ``/health`` and stops
sending new requests only when STOPFILE exists, SECONDS have passed, or a connection is refused
(the server is going away); requests already sent are awaited. Outcomes per request:

- ``ok``: 200 (output tokens counted from ``meta_info.completion_tokens``);
- ``lost``: the connection was accepted and the request then failed (reset, closed, timed out,
  or a 5xx other than 503): an in-flight request lost;
- ``s503``: 503 (refused while draining: not lost);
- ``refused``: the connection could not be opened (nothing in flight: not lost).

Writes the counts, the output tokens and tokens/s over the time the workers were sending to
OUT.json (and prints them). The copy of ``/work/shared/real-sglang/load_client.py`` that
measured a real 0.5.17 on an H100 (16 in flight lost at a drain's deadline), kept here so the
tests and the harness drive the simulator and the real server with the same client.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import time
from typing import Any


def run(port: int, out: str, stopfile: str, n: int, max_new: int, seconds: float) -> dict[str, Any]:
    """Keep ``n`` requests in flight until told to stop; returns (and writes) the counts."""
    stop = threading.Event()
    lock = threading.Lock()
    counts: dict[str, Any] = {"ok": 0, "lost": 0, "s503": 0, "refused": 0, "other": 0}
    counts["tokens"] = 0
    detail: list[str] = []
    body = json.dumps(
        {
            "text": "The quick brown fox jumps over the lazy dog. " * 4,
            "sampling_params": {"max_new_tokens": max_new, "ignore_eos": True, "temperature": 0},
        }
    )
    t0 = time.time()
    t_end = [0.0]

    def count(key: str, why: str = "") -> None:
        with lock:
            counts[key] += 1
            if why:
                detail.append(why)

    def worker() -> None:
        while not stop.is_set():
            if os.path.exists(stopfile) or time.time() - t0 > seconds:
                stop.set()
                break
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            try:
                conn.connect()
            except OSError:
                count("refused")
                stop.set()
                break
            try:
                conn.request("POST", "/generate", body, {"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                if response.status == 200:
                    count("ok")
                    try:
                        tokens = int(json.loads(data)["meta_info"]["completion_tokens"])
                    except (ValueError, KeyError, TypeError):
                        tokens = 0
                    with lock:
                        counts["tokens"] += tokens
                elif response.status == 503:
                    count("s503")
                elif response.status >= 500:
                    count("lost", str(response.status))
                else:
                    count("other", f"{response.status} {data[:80]!r}")
            except Exception as exc:  # accepted, then failed: lost in flight
                count("lost", type(exc).__name__)
            finally:
                conn.close()
        t_end[0] = max(t_end[0], time.time())

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    duration = max(t_end[0] - t0, 1e-9)
    counts.update(
        seconds=round(duration, 2),
        tok_s=round(counts["tokens"] / duration, 1),
        lost_detail=detail[:10],
        n=n,
        max_new=max_new,
    )
    with open(out, "w") as handle:
        json.dump(counts, handle)
    return counts


def main() -> int:
    """``load_client.py PORT OUT.json STOPFILE N MAX_NEW [SECONDS]``."""
    if len(sys.argv) < 6:
        print(__doc__, file=sys.stderr)
        return 2
    port, out, stopfile = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    n, max_new = int(sys.argv[4]), int(sys.argv[5])
    seconds = float(sys.argv[6]) if len(sys.argv) > 6 else 1e9
    print(json.dumps(run(port, out, stopfile, n, max_new, seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Closed-loop load on one SGLang server: N workers each keep one ``/generate`` in flight.

    python -m bench.real_sglang.load_client PORT OUT.json STOPFILE N MAX_NEW [SECONDS [STAGGER_S]]

The operator's own generation script, as the seed's sends: it never reads ``/health``, and
stops sending new requests only when STOPFILE exists, SECONDS have passed, or a connection is
refused (the server is going away); requests already sent are awaited. With STAGGER_S, worker i
sends its first request i * STAGGER_S seconds after the start, so that the requests do not all end
together: a drain's check that finds none running (lockstep answers, the next not yet sent) would
end the drain early, which a real script's varied prompts rarely allow. Outcome of each request:

- ok: 200 (its output tokens counted from ``meta_info.completion_tokens``);
- lost: the connection was accepted and the request then failed (reset, closed, timed out, or a
  5xx other than 503): an in-flight request lost;
- s503: 503 (refused while draining: not lost);
- refused: the connection could not be opened (nothing in flight: not lost).

Writes the counts, the output tokens and the tokens per second over the time the workers were
sending. The project's own copy of ``/work/shared/real-sglang/load_client.py`` (same behaviour),
standard library only: it runs under the GPU machine's bare Python.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import threading
import time

PROMPT = "The quick brown fox jumps over the lazy dog. " * 4


class Load:
    """The workers' shared counts."""

    def __init__(self, port: int, stopfile: str, seconds: float, max_new: int) -> None:
        self.port, self.stopfile, self.seconds = port, stopfile, seconds
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.counts = {"ok": 0, "lost": 0, "s503": 0, "refused": 0, "other": 0, "tokens": 0}
        self.detail: list[str] = []
        self.started = time.time()
        self.ended = 0.0
        params = {"max_new_tokens": max_new, "ignore_eos": True, "temperature": 0}
        self.body = json.dumps({"text": PROMPT, "sampling_params": params})

    def count(self, key: str, detail: str | None = None, tokens: int = 0) -> None:
        with self.lock:
            self.counts[key] += 1
            self.counts["tokens"] += tokens
            if detail is not None:
                self.detail.append(detail)

    def worker(self, delay: float = 0.0) -> None:
        """Keep one request in flight until told to stop, the first sent after ``delay`` s."""
        self.stop.wait(delay)
        while not self.stop.is_set():
            if os.path.exists(self.stopfile) or time.time() - self.started > self.seconds:
                self.stop.set()
                break
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            try:
                conn.connect()
            except OSError:
                self.count("refused")
                self.stop.set()
                break
            try:
                self.one(conn)
            except Exception as exc:  # accepted, then failed: lost in flight
                self.count("lost", type(exc).__name__)
            finally:
                conn.close()
        with self.lock:
            self.ended = max(self.ended, time.time())

    def one(self, conn: http.client.HTTPConnection) -> None:
        conn.request("POST", "/generate", self.body, {"Content-Type": "application/json"})
        reply = conn.getresponse()
        data = reply.read()
        if reply.status == 200:
            try:
                tokens = int(json.loads(data)["meta_info"]["completion_tokens"])
            except (ValueError, KeyError, TypeError):
                tokens = 0
            self.count("ok", tokens=tokens)
        elif reply.status == 503:
            self.count("s503")
        elif reply.status >= 500:
            self.count("lost", str(reply.status))
        else:
            self.count("other", f"{reply.status} {data[:80]!r}")


def main(argv: list[str]) -> int:
    """Run the load; print and write its counts. Returns 0."""
    port, out, stopfile = int(argv[0]), argv[1], argv[2]
    workers, max_new = int(argv[3]), int(argv[4])
    seconds = float(argv[5]) if len(argv) > 5 else 1e9
    stagger = float(argv[6]) if len(argv) > 6 else 0.0
    load = Load(port, stopfile, seconds, max_new)
    threads = [threading.Thread(target=load.worker, args=(i * stagger,)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spent = max(load.ended - load.started, 1e-9)
    result: dict[str, object] = dict(load.counts)
    result.update(
        seconds=round(spent, 2),
        tok_s=round(load.counts["tokens"] / spent, 1),
        lost_detail=load.detail[:10],
        n=workers,
        max_new=max_new,
    )
    with open(out, "w") as handle:
        json.dump(result, handle)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A closed-loop client on one SGLang server: N workers, each keeping one ``/generate`` in flight.

The load an operator's own generation script offers (the seed's: one client per server, a
fixed number of requests in flight): the server's running + queued stays at N whatever its
speed, which is what a canary's verdict needs to compare two configurations. Two ways to meet a
restart, both seen on real fleets:

- **give up** (default): a refused connection ends the client (the seed's script, which never
  reads ``/health``): the restarted server is left with no load at all;
- **reconnect** (``--reconnect``): a refused connection is retried every ``--retry-s`` until the
  server answers again, so the restarted server gets its load back.

Stops sending new requests when the stop file exists or ``--seconds`` passed; the requests in
flight are awaited. Writes ``--out`` (JSON): ok, lost (accepted, then failed), 503, refused,
output tokens, tokens/s over the sending time.

usage: python -m bench.closed_loop PORT --clients N --max-new M --out F [--stop-file S]
       [--seconds T] [--reconnect] [--retry-s R]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

PROMPT = "The quick brown fox jumps over the lazy dog. " * 4
"""A short prompt: decode dominates, as with the seed's ~2,500-token outputs."""


@dataclass
class Counts:
    """What the workers saw (guarded by the client's lock)."""

    ok: int = 0
    lost: int = 0
    s503: int = 0
    refused: int = 0
    other: int = 0
    tokens: int = 0
    detail: list[str] = field(default_factory=list)


class ClosedLoop:
    """N workers on one server (see module).

    Args:
        port: The server's port on 127.0.0.1.
        clients: Requests kept in flight.
        max_new: Output tokens per request (``ignore_eos``: every request makes exactly this).
        reconnect: Retry a refused connection instead of giving up.
        retry_s: Seconds between retries.
    """

    def __init__(
        self, port: int, clients: int, max_new: int, reconnect: bool = False, retry_s: float = 0.5
    ) -> None:
        self.port = port
        self.clients = clients
        self.reconnect = reconnect
        self.retry_s = retry_s
        self.stop = threading.Event()
        self.counts = Counts()
        self._lock = threading.Lock()
        self._body = json.dumps(
            {
                "text": PROMPT,
                "sampling_params": {
                    "max_new_tokens": max_new,
                    "ignore_eos": True,
                    "temperature": 0,
                },
            }
        )

    def _one(self) -> bool:
        """One request; False when the connection was refused."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=300)
        try:
            conn.connect()
        except OSError:
            with self._lock:
                self.counts.refused += 1
            return False
        try:
            conn.request("POST", "/generate", self._body, {"Content-Type": "application/json"})
            response = conn.getresponse()
            data = response.read()
            with self._lock:
                if response.status == 200:
                    self.counts.ok += 1
                    self.counts.tokens += _completion_tokens(data)
                elif response.status == 503:
                    self.counts.s503 += 1
                elif response.status >= 500:
                    self.counts.lost += 1
                    self.counts.detail.append(str(response.status))
                else:
                    self.counts.other += 1
                    self.counts.detail.append(f"{response.status} {data[:80]!r}")
        except (OSError, http.client.HTTPException) as error:  # accepted, then failed
            with self._lock:
                self.counts.lost += 1
                self.counts.detail.append(type(error).__name__)
        finally:
            conn.close()
        return True

    def _worker(self) -> None:
        while not self.stop.is_set():
            if self._one():
                continue
            if not self.reconnect:
                return  # the seed's script: a server that went away is given up on
            self.stop.wait(self.retry_s)

    def run(self, seconds: float, stop_file: str | None) -> dict[str, object]:
        """Send until ``seconds`` passed or ``stop_file`` exists (or every worker gave up)."""
        started = time.monotonic()
        workers = [threading.Thread(target=self._worker, daemon=True) for _ in range(self.clients)]
        for worker in workers:
            worker.start()
        while any(w.is_alive() for w in workers):
            if time.monotonic() - started >= seconds or (stop_file and os.path.exists(stop_file)):
                self.stop.set()
            # Event.wait is the bounded pause between looks at the stop file and the clock.
            self.stop.wait(0.2)
            if self.stop.is_set():
                break
        for worker in workers:
            worker.join()
        elapsed = max(time.monotonic() - started, 1e-9)
        out: dict[str, object] = asdict(self.counts)
        out["detail"] = self.counts.detail[:10]
        out.update(seconds=round(elapsed, 2), tokens_per_s=round(self.counts.tokens / elapsed, 1))
        return out


def _completion_tokens(body: bytes) -> int:
    try:
        return int(json.loads(body)["meta_info"]["completion_tokens"])
    except (ValueError, KeyError, TypeError):
        return 0


def main(argv: list[str] | None = None) -> int:
    """Run the client; its counts go to ``--out`` (and stdout)."""
    parser = argparse.ArgumentParser(prog="python -m bench.closed_loop", description=__doc__)
    parser.add_argument("port", type=int)
    parser.add_argument("--clients", type=int, default=48)
    parser.add_argument("--max-new", type=int, default=128)
    parser.add_argument("--out", required=True)
    parser.add_argument("--stop-file")
    parser.add_argument("--seconds", type=float, default=1e9)
    parser.add_argument("--reconnect", action="store_true")
    parser.add_argument("--retry-s", type=float, default=0.5)
    args = parser.parse_args(argv)
    client = ClosedLoop(args.port, args.clients, args.max_new, args.reconnect, args.retry_s)
    counts = client.run(args.seconds, args.stop_file)
    with open(args.out, "w") as handle:
        json.dump(counts, handle)
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

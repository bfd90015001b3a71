"""Load for the console benchmarks: a GPU busy with a changing duty cycle, and serving clients.

Two programs, each run as its own process (outside the measured programs' process trees):

* ``gpu``: a bf16 matrix-product loop on GPU 0 whose duty cycle changes every second (through
  ``DUTY``), so utilisation, power, clocks and temperature move and both programs have
  something to redraw. Needs PyTorch and a CUDA device.
* ``clients``: ``--per-server`` concurrent clients per port, each sending ``/generate`` requests
  back to back (ignore_eos, ``--tokens`` new tokens), so every server's running count, token
  usage and throughput change each second.

    python -m bench.gpu_load gpu --seconds 600
    python -m bench.gpu_load clients --ports 31000,31001 --per-server 12 --seconds 600
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import time

import httpx

DUTY = (0.15, 0.6, 0.9, 0.35, 0.75, 0.05)
"""The share of each second the GPU computes, cycled."""


def gpu_loop(seconds: float, size: int = 4096) -> int:
    """Run matrix products on GPU 0 at a duty cycle that changes each second.

    Args:
        seconds: How long to run.
        size: Square matrix side (bf16; 4096 takes ~0.2 ms a product on an H200).

    Returns:
        How many products ran.
    """
    import torch

    a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
    end = time.monotonic() + seconds
    count = 0
    for duty in itertools.cycle(DUTY):
        second = time.monotonic()
        if second >= end:
            break
        busy_until = second + duty
        while time.monotonic() < busy_until:
            for _ in range(8):
                a = (a @ b) * 1e-3  # scaled so values stay finite
            torch.cuda.synchronize()
            count += 8
        time.sleep(max(0.0, second + 1.0 - time.monotonic()))
    return count


async def _client(http: httpx.AsyncClient, url: str, tokens: int, end: float) -> int:
    done = 0
    body = {
        "text": "Write a long story about a lighthouse keeper.",
        "sampling_params": {"max_new_tokens": tokens, "ignore_eos": True},
    }
    while time.monotonic() < end:
        with contextlib.suppress(httpx.HTTPError):
            response = await http.post(url, json=body, timeout=120)
            done += response.status_code == 200
    return done


async def clients(ports: list[int], per_server: int, tokens: int, seconds: float) -> int:
    """``per_server`` concurrent clients on each port for ``seconds``; requests completed."""
    end = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=per_server * len(ports) + 4)
    async with httpx.AsyncClient(limits=limits) as http:
        counts = await asyncio.gather(
            *(
                _client(http, f"http://127.0.0.1:{port}/generate", tokens, end)
                for port in ports
                for _ in range(per_server)
            )
        )
    return sum(counts)


def main(argv: list[str] | None = None) -> int:
    """``gpu`` or ``clients`` (see the module's docstring)."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="what", required=True)
    gpu = sub.add_parser("gpu")
    gpu.add_argument("--seconds", type=float, default=600.0)
    cli = sub.add_parser("clients")
    cli.add_argument("--ports", required=True, help="comma-separated ports")
    cli.add_argument("--per-server", type=int, default=12)
    cli.add_argument("--tokens", type=int, default=256)
    cli.add_argument("--seconds", type=float, default=600.0)
    args = parser.parse_args(argv)
    if args.what == "gpu":
        print(f"gpu load: {gpu_loop(args.seconds)} products", flush=True)
    else:
        ports = [int(p) for p in args.ports.split(",")]
        done = asyncio.run(clients(ports, args.per_server, args.tokens, args.seconds))
        print(f"clients: {done} requests", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

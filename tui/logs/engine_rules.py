"""Rules for the engine lines a real SGLang 0.5.17 server writes besides its allocations.

Read from its wheel and checked on its own logs (``tests/fixtures/real_sglang/0.5.17``):

* ``srt/distributed/bootstrap.py``: ``Init torch distributed begin.`` opens each worker's startup
  (the target's, then the draft's with speculative decoding; ``... ends`` is a memory baseline);
* tqdm bars (stderr): ``Capturing num tokens (num_tokens=8192 avail_mem=61.04 GB):   2%|▏ | 1/58
  [00:01<01:11,  1.26s/it]`` while the prefill CUDA graphs are captured, ``Capturing batches (bs=16
  avail_mem=60.84 GB): ...`` for the decode ones, a bare ``  0%|   | 0/58 [...]`` first;
* ``srt/model_executor/model_runner.py``: ``Disable prefill CUDA graph because cuda_graph_config
  resolved prefill.backend='disabled' ...``;
* ``srt/entrypoints/engine.py``: ``Engine startup timings (s): load_weight=..,
  kv_cache_allocation=.., scheduler_e2e=.., cuda_graph={prefill=.., ...}, tokenizer_e2e=..``;
* ``srt/mem_cache``: ``Init Unified RadixTree with components (...)`` and ``Tree cache initialized:
  source=default impl=UnifiedRadixCache ... hybrid_ssm=True ...`` (``impl=ChunkCache`` without a
  radix cache);
* ``srt/layers/attention``: the kernels of a hybrid model (``Linear attention kernel backend: ...``,
  ``GDN kernel dispatcher: ...``);
* deprecations: the argument parser's yellow ``'--disable-cuda-graph' is deprecated and will be
  removed in a future release. Use '...' instead.`` (its colour codes are stripped before any rule
  runs, ``tui.logs.parser.split_prefix``), ``The command line argument '--x' is deprecated ...``
  and ``Endpoint '/get_load' is deprecated ... Please use '/v1/loads' instead.``;
* Python's own warnings (``launch_server.py:56: UserWarning: ...``): the header line (its indented
  continuation lines are joined to it by ``tui.logs.blocks``).
"""

from __future__ import annotations

import re

from tui.logs.fields import Fields, gb, put, value

_DIST_INIT = re.compile(r"^\s*Init torch distributed begin\b")


def dist_init(message: str) -> Fields | None:
    """``Init torch distributed begin.``: a worker (target, then draft) starts initialising."""
    return {"stage": "begin"} if _DIST_INIT.search(message) else None


_BAR = re.compile(
    r"^(?P<desc>.*?)\s*(?P<percent>\d{1,3})%\|[^|]*\|\s*(?P<done>\d+)/(?P<total>\d+)\s*"
    r"\[[^\]]*(?:it/s|s/it)\]\s*$"
)
_BAR_TOKENS = re.compile(r"num_tokens=\s*(\d+)")
_BAR_BS = re.compile(r"\bbs=\s*(\d+)")
_BAR_AVAIL = gb(r"avail_mem=")


def progress(message: str) -> Fields | None:
    """A tqdm bar: ``desc``, ``percent``, ``done``, ``total``; a CUDA-graph capture bar adds
    ``graph`` (``prefill`` by token count, ``decode`` by batch size) and its current size."""
    match = _BAR.match(message)
    if not match:
        return None
    desc = match["desc"].rstrip(": ").strip()
    out: Fields = {
        "desc": desc,
        "percent": int(match["percent"]),
        "done": int(match["done"]),
        "total": int(match["total"]),
    }
    if desc.startswith("Capturing"):
        out["graph"] = "prefill" if "num tokens" in desc else "decode"
        put(out, "num_tokens", _BAR_TOKENS, desc)
        put(out, "bs", _BAR_BS, desc)
        put(out, "avail_mem_gb", _BAR_AVAIL, desc)
    return out


_TIMINGS = re.compile(r"Engine startup timings \(s\):\s*(.*)$")
_TIMING = re.compile(r"(\w+)=\s*(-?[\d.]+)")
_GRAPHS = re.compile(r"cuda_graph=\{([^}]*)\}")


def startup_timings(message: str) -> Fields | None:
    """``Engine startup timings (s): ...``: each top-level phase as ``<name>_s``, the CUDA graphs'
    total as ``cuda_graph_s``."""
    match = _TIMINGS.search(message)
    if not match:
        return None
    body = match.group(1)
    graphs = _GRAPHS.search(body)
    out: Fields = {}
    if graphs:
        out["cuda_graph_s"] = round(sum(float(v) for _, v in _TIMING.findall(graphs.group(1))), 2)
        body = body[: graphs.start()] + body[graphs.end() :]
    for name, raw in _TIMING.findall(body):
        out[f"{name}_s"] = value(raw)
    return out


_TREE = re.compile(r"Tree cache initialized:\s*(.*)$")
_TREE_PAIR = re.compile(r"(\w+)=(\S+)")
_RADIX_INIT = re.compile(r"Init (\w+) RadixTree with components \((.*)\)")


def tree_cache(message: str) -> Fields | None:
    """``Tree cache initialized: source=.. impl=.. hybrid_ssm=..`` (``stage`` ready) or ``Init
    Unified RadixTree with components (...)`` (``stage`` init, ``components``)."""
    match = _TREE.search(message)
    if match:
        out: Fields = {"stage": "ready"}
        for key, raw in _TREE_PAIR.findall(match.group(1)):
            out[key] = raw == "True" if raw in ("True", "False") else raw
        return out
    match = _RADIX_INIT.search(message)
    if match:
        names = re.findall(r"ComponentType\.(\w+)", match.group(2))
        return {"stage": "init", "tree": match.group(1), "components": ",".join(names).lower()}
    return None


_GRAPH_DISABLED = re.compile(r"Disable (\w+) CUDA graph because (.*)$")


def graph_disabled(message: str) -> Fields | None:
    """``Disable prefill CUDA graph because ...``: a graph_capture event, ``stage`` disabled."""
    match = _GRAPH_DISABLED.search(message)
    if not match:
        return None
    return {"stage": "disabled", "graph": match.group(1), "reason": match.group(2).strip()}


_DEPRECATED_FLAG = re.compile(
    r"^\s*'(?P<flag>--[\w-]+)' is deprecated and will be removed in a future release\."
    r"(?:\s*Use '(?P<new>[^']+)' instead\.)?"
)
_DEPRECATED_ARG = re.compile(r"The command line argument '(?P<flag>--[\w-]+)' is deprecated")
_DEPRECATED_ENDPOINT = re.compile(
    r"Endpoint '(?P<endpoint>[^']+)' is deprecated.*?(?:Please use '(?P<new>[^']+)' instead)?\.?$"
)


def deprecated(message: str) -> Fields | None:
    """A deprecated flag (``flag``, ``replacement``) or endpoint (``endpoint``, ``replacement``)."""
    for pattern in (_DEPRECATED_FLAG, _DEPRECATED_ARG, _DEPRECATED_ENDPOINT):
        match = pattern.search(message)
        if match:
            found = match.groupdict()
            out: Fields = {k: v for k, v in found.items() if v and k != "new"}
            if found.get("new"):
                out["replacement"] = found["new"]
            return out
    return None


_PY_WARNING = re.compile(
    r"^(?P<file>\S+\.py):(?P<line>\d+): (?P<category>[A-Za-z_]*Warning): (?P<message>.*)$"
)


def python_warning(message: str) -> Fields | None:
    """Python's ``file.py:N: XWarning: message`` (``warnings.formatwarning``)."""
    match = _PY_WARNING.match(message)
    if not match:
        return None
    return {
        "category": match["category"],
        "file": match["file"].rsplit("/", 1)[-1],
        "message": match["message"].strip(),
    }


_BACKEND_PAIR = re.compile(r"(\w+)=(\w+)")
_BACKENDS = (
    ("linear_attention", re.compile(r"Linear attention kernel backend:\s*(.*)$")),
    ("gdn_kernel", re.compile(r"GDN kernel dispatcher:\s*(.*)$")),
    ("hybrid_linear_attention", re.compile(r"Using hybrid linear attention backend\b()")),
)


def backend(message: str) -> Fields | None:
    """The kernels a hybrid model runs with (``srt/layers/attention``): ``Linear attention kernel
    backend: decode=triton, ...``, ``GDN kernel dispatcher: decode=TritonGDNKernel, ...``, ``Using
    hybrid linear attention backend for hybrid GDN models.``: ``what`` and each choice."""
    for what, pattern in _BACKENDS:
        match = pattern.search(message)
        if match:
            out: Fields = {"what": what}
            for key, raw in _BACKEND_PAIR.findall(match.group(1)):
                out[key] = value(raw)
            return out
    return None

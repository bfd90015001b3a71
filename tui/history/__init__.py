"""The fleet's history: per-GPU and fleet time series that survive the console (no Textual).

Written by the console (``HistoryRecorder``: every monitor snapshot and pipeline status document,
batched, in a thread worker) to ``tui.paths.history_file()`` in the state directory; read back by
any console after a re-attach. Bounded: 5 s buckets for 2 hours, 1 minute for 2 days, 15 minutes
for 120 days, and a 64 MiB cap on the file (``tui.history.store``).

Reading it (blocking: from a thread worker)::

    from tui import paths
    from tui.history import HistoryStore

    store = HistoryStore(paths.history_file())   # or the console's: app.history.store
    points = store.series(3, "tok_s", since=time.time() - 600)   # GPU 3, last 10 minutes
    fleet = store.series(None, "out_tok_s", since=time.time() - 3600)

``series(gpu, metric, since, until=None) -> list[(t, value)]``: (bucket start as time.time(),
mean of the samples in it), oldest first, from the finest tier that reaches back to ``since``.
``gpu`` is a GPU index, or None for the fleet's series. Metrics (``tui.history.samples.METRICS``):

====================  ======  ==========================================================
metric                gpu     value
====================  ======  ==========================================================
``util``              N       GPU utilisation, % (NVML)
``mem``               N       GPU memory used, % of the GPU's total
``tok_s``             N       generation throughput, tokens/s (the server's Decode lines)
``running``           N       requests running on the server
``queued``            N       requests queued on the server
``mem_total``         N       the GPU's memory, bytes (with ``mem``: the bytes in use)
``kv``, ``mamba``     N       the full-attention KV pool's and the Mamba pool's use, %
``power``, ``temp``   N       board power (W), core temperature (°C)
``ready``             N       1 while the server was ready, else 0 (a bucket: its share)
``accept``            N       the draft's accept length (while the server runs one)
``tok_j``             N/None  output tokens per joule over the energy window
``ttft_p50`` ...      N/None  latency percentiles over their window, s: ``ttft``, ``itl``,
                              ``e2e``, ``queue`` x ``p50``, ``p90``, ``p99``
``watts``             None    every metered GPU's mean power over the energy window
``out_tok_s``         None    the pipeline's output tokens/s over its last minute
``req_s``             None    the pipeline's completed requests/s over its last minute
====================  ======  ==========================================================

41 hours of a 7-GPU fleet (191 series) take 20.0 MiB (``python -m bench.history_size``).
``HistoryStore.values_at(t)`` reads every series at one past moment, and
``tui.history.replay.HistorySource`` builds the fleet snapshot of then from it (the replay's
source); ``gpufleet history export`` writes the buckets as CSV or NDJSON (``tui.history.cli``).

A per-GPU value that was unknown is absent (a gap), never 0. The fleet's rates are the
pipeline's while it runs, and 0 at every reading of a console while the job makes no output (no
status document, a pipeline stopped, finished or failed, or one whose document has not been
rewritten for 15 s: ``samples.job_idle``). So a bucket with no traffic holds 0, and a bucket
with nothing in it is a time when no console was running: the charts draw the first as zero and
the second as a gap. ``first_time(gpu, metric)`` is when the oldest bucket kept starts (the
start of a "whole job" view). Operation markers are not stored here: they come from the journal
(``tui.ops.marks``).
"""

from tui.history.recorder import HistoryRecorder
from tui.history.samples import METRICS, Metric
from tui.history.store import FLEET, TIERS, HistoryError, HistoryStore, Point, Sample, Tier

__all__ = [
    "FLEET",
    "METRICS",
    "TIERS",
    "HistoryError",
    "HistoryRecorder",
    "HistoryStore",
    "Metric",
    "Point",
    "Sample",
    "Tier",
]

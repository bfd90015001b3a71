"""The log layer: follow SGLang server logs and turn their lines into typed events.

Core, no Textual. Public API (what the fleet monitor and the CLI call):

* :func:`tui.logs.parser.parse_line` ``(text, line=0) -> LogEvent | None``: one line of any SGLang
  era into a :class:`tui.logs.events.LogEvent` (``kind``, ``fields``, ``text``, ``stamp``,
  ``ranks``, ``line``; ``to_json()``). Kinds and their fields are listed in :mod:`tui.logs.events`.
* :func:`tui.logs.blocks.read_records` ``(lines, first_line=1)``: the same, record by record: a
  Python traceback is one error event (its last line's), a Python warning one event with its
  continuation lines; each record says which lines it covers (what ``gpufleet logs parse`` prints).
* :class:`tui.logs.tailer.LogTailer` ``(path, attach_bytes=4 MiB)``: ``read_new() -> list[str]``,
  ``read_new_bytes() -> bytes`` and ``read_new_numbered() -> (first_line, bytes)`` return only
  complete new lines; it attaches to the last ``attach_bytes`` of a big file, survives truncation
  and rotation, and treats a missing file as empty. Blocking: run it in a thread worker.
* :func:`tui.logs.ingest.ingest_bytes` ``(data, first_line=0, *, last_prefill=True) ->
  IngestSummary``: C-speed summary of a chunk of whole lines: line/decode/prefill counts, the
  latest decode and prefill events (the prefill one skipped with ``last_prefill=False``), and
  every rare event (allocations, caps, ready, errors...) in order. ``ingest_file(path)`` does
  a whole file.
* :class:`tui.logs.state.LogState`: per-server state; ``apply(event)``, ``apply_summary(summary)``,
  ``view() -> LogView`` (immutable; field names follow ``tui.fleet.snapshot.ServerSnapshot``).

Typical per-server loop, in a thread worker, once a second::

    tailer, state = LogTailer(log_path), LogState()
    first_line, data = tailer.read_new_numbered()
    if data:
        state.apply_summary(ingest_bytes(data, first_line))
    view = state.view()   # post it to the UI

``gpufleet logs parse FILE`` / ``gpufleet logs summary FILE`` are in :mod:`tui.logs.cli`.
"""

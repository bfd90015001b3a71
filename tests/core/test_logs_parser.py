"""parse_line on every reference line of every era: kind and key fields, not just 'parses'."""

from __future__ import annotations

import pytest
from logs_helpers import FIXTURES

from tui.logs.events import ERROR_REASONS, LogEvent
from tui.logs.parser import parse_line, split_prefix
from tui.logs.state import LogState, LogView

# line number in sglang-log-samples.txt -> (kind or None, fields that must be present and equal)
SAMPLES: dict[int, tuple[str | None, dict[str, object]]] = {
    1: ("decode", {"running_req": 5, "tokens": 20800, "token_usage": 0.29, "queue_req": 0}),
    2: ("decode", {"running_req": 1010, "gen_throughput": 1397.13, "queue_req": 12279}),
    3: ("prefill", {"new_seq": 16, "new_token": 9088, "cached_token": 1114624, "mamba_usage": 0.8}),
    4: ("decode", {"running_req": 1, "gen_throughput": 84.39, "cache_miss": 1}),
    5: ("prefill", {"new_seq": 1, "new_token": 2062, "cached_token": 0, "cache_hit_rate": 0.0}),
    6: ("prefill", {"new_seq": 2, "cached_token": 8027, "running_req": 28, "queue_req": 0}),
    7: ("decode", {"running_req": 8, "tokens": 62531, "gen_throughput": 186.64}),
    8: ("kv_cache", {"tokens": 367404, "k_gb": 8.23, "v_gb": 8.23}),
    9: (None, {}),
    10: (None, {}),
    11: ("error", {"reason": "oom", "exception": "RuntimeError"}),
    12: ("profiled", {"max_total_tokens": 131072, "profiled": -561981}),
    13: ("memory_pool_end", {"avail_mem_gb": 11.87}),
    14: ("graph_capture", {"stage": "bs", "num_bs": 52, "max_bs": 512}),
    15: ("prefill", {"new_seq": 1, "new_token": 28, "queue_req": 0}),
    16: ("decode", {"accept_len": 1.8, "accept_rate": 0.45, "cuda_graph": True, "queue_req": 0}),
    17: ("error", {"reason": "sigquit"}),
    18: (None, {}),
    19: ("error", {"reason": "oom", "detail": "cuda"}),
    20: ("graph_capture", {"stage": "begin"}),
    21: ("uvicorn", {"event": "started", "pid": 3831493}),
    22: ("uvicorn", {"event": "running", "port": 30000}),
    23: ("weights", {"mem_usage_gb": 3.76, "avail_mem_gb": 19.08, "elapsed_s": 653.47}),
    24: ("mamba_cache", {"max_mamba_cache_size": 82, "conv_gb": 0.13, "ssm_gb": 7.29}),
    25: ("backend", {"what": "hybrid_linear_attention"}),
    26: (None, {}),
    27: ("prefill", {"new_token": 2048, "token_usage": 0.01, "swa_token_usage": 0.02}),
    28: ("access", {"method": "POST", "path": "/v1/chat/completions", "status": 200}),
    29: ("prefill", {"new_token": 8192, "queue_req": 1, "pending_token": 46401}),
    30: ("decode", {"running_req": 32, "tokens": 11179, "gen_throughput": 1635.11}),
    31: ("prefill", {"new_seq": 1, "new_token": 18, "cached_token": 2510, "running_req": 0}),
    32: ("prefill", {"new_token": 353, "queue_req": 1, "running_req": 3, "cache_hit_rate": 80.82}),
    33: ("error", {"reason": "scheduler_exception"}),
    34: ("decode", {"running_req": 1, "tokens": 137, "gen_throughput": 1.06}),
    35: ("prefill", {"new_seq": 2, "running_req": 69, "queue_req": 130}),
    36: ("prefill", {"new_seq": 10, "running_req": 4, "queue_req": 186}),
    37: ("prefill", {"new_token": 2266, "cached_token": 1}),
    38: ("memory_pool_end", {"avail_mem_gb": 8.4}),
    39: ("backend", {"what": "linear_attention", "decode": "triton", "verify": "triton"}),
    40: (None, {}),
    41: ("error", {"reason": "sigquit"}),
    42: ("decode", {"running_req": 8, "accept_len": 2.9, "gen_throughput": 171.01}),
    43: ("prefill", {"new_seq": 8, "cached_token": 482304, "cuda_graph": False}),
    44: (None, {}),
    45: ("decode", {"tokens": 1470941, "token_usage": 0.09, "mamba_num": 18, "mamba_usage": 0.9}),
    46: ("error", {"reason": "illegal_memory_access"}),
    47: ("decode", {"running_req": 20, "mamba_usage": 1.0, "queue_req": 6}),
    48: ("kv_cache", {"tokens": 330323, "k_gb": 10.08, "dtype": "torch.bfloat16"}),
    49: ("ready", {}),
    50: (
        "pool",
        {
            "max_total_num_tokens": 1543256,
            "max_running_requests": 32,
            "chunked_prefill_size": 16384,
            "context_len": 262144,
            "available_gpu_mem_gb": 77.76,
        },
    ),
    51: ("weights", {"quant": "fp8", "fmt": "e4m3", "mem_usage_gb": 14.49}),
    52: ("weights_begin", {"avail_mem_gb": 109.98}),
    53: ("kv_cache", {"tokens": 1226984, "kv_gb": 9.21}),
    54: ("pool", {"max_total_num_tokens": 1226984, "available_gpu_mem_gb": 10.39}),
    55: ("ready", {}),
}


def _check(event: LogEvent | None, kind: str | None, fields: dict[str, object]) -> None:
    if kind is None:
        assert event is None
        return
    assert event is not None and event.kind == kind
    for name, value in fields.items():
        assert event.fields.get(name) == value, (name, dict(event.fields))


def test_every_sample_line_has_its_kind_and_fields() -> None:
    lines = (FIXTURES / "sglang-log-samples.txt").read_text().splitlines()
    assert len(lines) == len(SAMPLES)
    for number, text in enumerate(lines, start=1):
        kind, fields = SAMPLES[number]
        event = parse_line(text, number)
        _check(event, kind, fields)
        if event is not None:
            assert event.line == number


def test_batch_lines_carry_the_schema_fields() -> None:
    lines = (FIXTURES / "sglang-log-samples.txt").read_text().splitlines()
    for text in lines:
        event = parse_line(text)
        if event and event.kind == "decode":
            assert {"running_req", "token_usage"} <= set(event.fields)
        if event and event.kind == "prefill":
            assert {"new_seq", "new_token", "cached_token", "running_req"} <= set(event.fields)


def test_seed_lines() -> None:
    lines = (FIXTURES / "seed-lines.txt").read_text().splitlines()
    events = [parse_line(text, i) for i, text in enumerate(lines, start=1)]
    assert [e.kind if e else None for e in events] == [
        "mamba_cache",
        "kv_cache",
        "kv_cache",
        "pool",
    ]
    mamba, kv_target, kv_draft, pool = events
    assert mamba is not None and kv_target is not None and kv_draft is not None
    assert mamba.fields["max_mamba_cache_size"] == 200
    assert mamba.fields["ssm_gb"] == 28.27 and mamba.fields["conv_gb"] == 0.55
    assert mamba.fields["intermediate_ssm_gb"] == 23.06
    assert mamba.fields["intermediate_conv_gb"] == 0.45
    assert kv_target.fields["tokens"] == kv_draft.fields["tokens"] == 798080
    assert (kv_target.fields["k_gb"], kv_draft.fields["v_gb"]) == (24.36, 1.52)
    assert pool is not None and pool.fields["max_total_num_tokens"] == 798080
    assert pool.stamp == "2026-05-09 22:18:34"


OPS: list[tuple[str, dict[str, object]]] = [
    ("decode", {"running_req": 5, "tokens": 1938, "token_usage": 0.24}),
    ("decode", {"running_req": 2, "gen_throughput": 447.31}),
    ("decode", {"accept_len": 2.17, "accept_rate": 0.54, "gen_throughput": 0.39}),
    ("decode", {"running_req": 46, "cuda_graph": False}),
    ("decode", {"gen_throughput": 144.95}),
    ("prefill", {"new_seq": 3, "cache_hit_rate": 2.76}),
    ("weights", {"dtype": "torch.float16", "avail_mem_gb": 9.69}),
    ("weights", {"mem_usage_gb": 166.59}),
    ("memory_baseline", {"mem_usage_gb": 0.62}),
    ("memory_baseline", {"mem_usage_gb": 0.0}),
    ("reset_48", {"max_running_requests": 48}),
    (
        "cap",
        {"max_running_requests": 9, "max_mamba_cache_size": 47, "slots_per_request": 5},
    ),
    ("cap", {"max_running_requests": 32, "requested": 64}),
    ("profiled", {"max_total_tokens": 131072, "profiled": 99000}),
    ("kv_cache", {"tokens": 5000, "label": "target"}),
    ("kv_cache", {"tokens": 6000, "upper_bound": True}),
    ("graph_capture", {"stage": "begin", "graph": "target decode", "avail_mem_gb": 20.5}),
    ("graph_capture", {"stage": "end", "elapsed_s": 3.21, "max_bs": 8, "avail_mem_gb": 19.7}),
    ("graph_capture", {"graph": "draft extend", "elapsed_s": 62.0}),
    ("graph_capture", {"stage": "end", "elapsed_s": 12.11, "avail_mem_gb": 16.74}),
    ("pool", {"max_total_num_tokens": 56524, "max_running_requests": 2049}),
    ("pool", {"max_total_num_tokens": 40000, "max_prefill_tokens": 16384}),
    ("server_args", {"port": 30003, "mem_fraction_static": 0.93}),
    ("uvicorn", {"event": "waiting"}),
    ("uvicorn", {"event": "startup_complete"}),
    ("error", {"reason": "oom", "detail": "kv_pool", "mem_fraction_static": 0.84}),
    ("error", {"reason": "oom", "detail": "kv_pool"}),
    ("error", {"reason": "oom", "min_fraction": 0.862, "mem_fraction_static": 0.8}),
    ("error", {"reason": "oom", "detail": "mamba_state_cache"}),
    ("error", {"reason": "oom", "detail": "mamba_state_cache_too_small"}),
    ("error", {"reason": "oom", "detail": "mamba_runtime"}),
    ("error", {"reason": "oom", "exception": "AssertionError"}),
    ("error", {"reason": "oom", "exception": "torch.OutOfMemoryError"}),
    ("error", {"reason": "sigquit"}),
    ("error", {"reason": "killed"}),
    ("error", {"reason": "input_too_long", "input_tokens": 300000, "max_tokens": 262000}),
    ("error", {"reason": "health_check_failed"}),
    ("error", {"reason": "watchdog_timeout"}),
    ("error", {"reason": "watchdog_timeout"}),
    ("error", {"reason": "port_in_use"}),
    ("error", {"reason": "port_in_use"}),
    ("error", {"reason": "warmup_failed"}),
    ("shutdown", {"event": "sigterm"}),
    ("shutdown", {"event": "draining", "remaining": 7}),
]


def test_ops_examples() -> None:
    lines = (FIXTURES / "ops-examples.txt").read_text().splitlines()
    assert len(lines) == len(OPS)
    for text, (kind, fields) in zip(lines, OPS, strict=True):
        _check(parse_line(text), kind, fields)


def test_every_error_reason_but_the_generic_one_is_exercised() -> None:
    reasons = {fields["reason"] for kind, fields in OPS if kind == "error"}
    reasons |= {"scheduler_exception", "illegal_memory_access"}  # from the samples file
    reasons |= {r for k, r, _ in LINES_0523.values() if k == "error"}  # 0.5.23's own lines
    assert ERROR_REASONS - reasons == {"exception"}
    assert parse_line("KeyError: 'foo'") == LogEvent(
        "error",
        {"exception": "KeyError", "reason": "exception", "fatal": False},
        "KeyError: 'foo'",
    )


DECODE_BODY = "Decode batch, #running-req: 7, #token: 70, token usage: 0.07, #queue-req: 3"
DECODE_ITER = DECODE_BODY.replace("Decode batch,", "Decode batch [51341],")


@pytest.mark.parametrize(
    ("raw", "stamp", "ranks"),
    [
        (f"[2026-04-05 20:02:51] {DECODE_BODY}", "2026-04-05 20:02:51", None),
        (
            f"[2026-04-05 20:02:51.123 DP1 TP1 EP1] {DECODE_BODY}",
            "2026-04-05 20:02:51.123",
            "DP1 TP1 EP1",
        ),
        (f"[2026-04-05 20:02:51 TP0 EP0] {DECODE_BODY}", "2026-04-05 20:02:51", "TP0 EP0"),
        (f"[16:43:29 TP0] {DECODE_BODY}", "16:43:29", "TP0"),
        (f"[gpu_id=0] {DECODE_BODY}", None, "gpu_id=0"),
        (DECODE_BODY, None, None),
        (f"sglang-1  | [2026-04-05 20:02:51 TP1] {DECODE_BODY}", "2026-04-05 20:02:51", "TP1"),
        (f"sglang-1  | {DECODE_BODY}", None, None),
        (
            f"(SGLangEngine pid=35555, ip=10.0.0.1) [2026-04-05 20:02:51 TP0] {DECODE_BODY}",
            "2026-04-05 20:02:51",
            "TP0",
        ),
        (f"(Actor pid=12) {DECODE_BODY}", None, None),
        (
            f"Loading: 100%|██████| 3/3 [00:05<00:00,  1.7s/it][2026-04-05 20:02:51] {DECODE_BODY}",
            "2026-04-05 20:02:51",
            None,
        ),
        (f"Capturing batches (bs=4): 100%|███| 4/4 [00:02<00:00]\r{DECODE_BODY}\r\n", None, None),
        (
            f"[2026-04-05 20:02:51] {DECODE_ITER}, ",
            "2026-04-05 20:02:51",
            None,
        ),
    ],
)
def test_prefixes_of_every_era(raw: str, stamp: str | None, ranks: str | None) -> None:
    event = parse_line(raw, 9)
    assert event is not None and event.kind == "decode"
    assert (event.stamp, event.ranks, event.line) == (stamp, ranks, 9)
    assert event.fields["running_req"] == 7 and event.fields["queue_req"] == 3
    assert event.text.startswith("Decode batch")


def test_unknown_keys_and_trailing_comma_do_not_break_a_line() -> None:
    event = parse_line(
        "Decode batch, #running-req: 3, #weird-new-thing: 12, pre-allocated usage: 0.5, "
        "no colon here, gen throughput (token/s): 10.50, #queue-req: 1, "
    )
    assert event is not None and event.fields["gen_throughput"] == 10.5
    assert event.fields["queue_req"] == 1 and event.fields["weird_new_thing"] == 12


def test_split_prefix_keeps_the_message() -> None:
    message, stamp, ranks = split_prefix("sglang-1  | [2025-11-01 16:50:36 TP1] Setup Custom")
    assert (message, stamp, ranks) == ("Setup Custom", "2025-11-01 16:50:36", "TP1")


def test_to_json_is_flat_and_read_only() -> None:
    event = parse_line("[2026-10-10 12:00:13] The server is fired up and ready to roll!", 4)
    assert event is not None
    assert event.to_json().startswith('{"line": 4, "kind": "ready"')
    with pytest.raises(TypeError):
        event.fields["x"] = 1  # type: ignore[index]  # read-only on purpose: the write must fail


def _chain_view(chain: list[str]) -> LogView:
    """The log state's view after each line of ``chain`` (each must parse)."""

    state = LogState()
    for number, text in enumerate(chain, 1):
        event = parse_line(text, number)
        assert event is not None, text
        state.apply(event)
    return state.view()


def test_log_state_keeps_the_oom_as_the_cause_of_a_crash_chain() -> None:
    chain = [
        "[2026-12-02 17:45:00] Scheduler hit an exception: Traceback (most recent call last):",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total "
        "capacity of 139.81 GiB of which 1.02 GiB is free.",
        "[2026-12-02 17:45:00] Received sigquit from a child process. It usually means the child "
        "failed.",
        "Killed",
    ]
    view = _chain_view(chain)
    assert view.failed
    assert view.error_reason == "oom"
    assert view.last_error is not None and "CUDA out of memory" in view.last_error


def test_log_state_keeps_a_taken_port_as_the_cause_of_the_warmup_failure() -> None:
    """The lines a simulated server printed in a fresh clone's run (its port taken meanwhile)."""
    chain = [
        "[2026-12-03 18:00:44] ERROR:    [Errno 98] error while attempting to bind on address "
        "('127.0.0.1', 37042): address already in use",
        "[2026-12-03 18:00:45] Initialization failed. warmup error: Traceback (most recent call "
        "last):",
        'RuntimeError: /model_info never answered: ConnectionRefusedError(111, "Connect call '
        "failed ('127.0.0.1', 37042)\")",
    ]
    view = _chain_view(chain)
    assert view.failed
    assert view.error_reason == "port_in_use"
    assert view.last_error is not None and "address already in use" in view.last_error


# Lines the parser used to miss, written from SGLang 0.5.23's source (the sample file holds none of
# them): srt/mem_cache/allocation.py, srt/managers/scheduler.py (retraction), srt/utils/watchdog.py,
# srt/server_args.py (argparse, prog "sglang serve"), srt/managers/tokenizer_manager.py,
# srt/entrypoints/http_server.py. line -> (kind, reason or event, fatal).
LINES_0523: dict[int, tuple[str | None, str | None, bool | None]] = {
    1: ("pressure", "prefill_oom", False),
    2: (None, None, None),
    3: (None, None, None),
    4: ("error", "scheduler_exception", True),
    5: ("error", "oom", True),
    6: ("pressure", "decode_oom", False),
    7: ("error", "oom", True),
    8: ("pressure", "retract", False),
    9: ("error", "subprocess_crashed", True),
    10: ("error", "bad_arguments", True),
    11: ("error", "bad_arguments", True),
    12: ("error", "bad_arguments", True),
    13: ("error", "scheduler_straggler", True),
    14: ("error", "health_check_failed", True),
    15: ("shutdown", "force_exit", None),
    16: ("shutdown", "sigterm", None),
    17: ("shutdown", "draining", None),
    18: ("error", "sigquit", True),
    19: ("error", "detokenizer_exception", True),
    20: ("error", "input_too_long", False),
}


def test_0523_lines_have_kind_reason_and_fatal() -> None:
    lines = (FIXTURES / "sglang-0523-lines.txt").read_text().splitlines()
    assert len(lines) == len(LINES_0523)
    for number, text in enumerate(lines, start=1):
        kind, reason, fatal = LINES_0523[number]
        event = parse_line(text, number)
        if kind is None:
            assert event is None, text
            continue
        assert event is not None and event.kind == kind, (number, event)
        got = event.get("event") if kind == "shutdown" else event.get("reason")
        assert got == reason, (number, dict(event.fields))
        if fatal is not None:
            assert event.get("fatal") is fatal, (number, dict(event.fields))


def test_0523_lines_carry_their_numbers() -> None:
    lines = (FIXTURES / "sglang-0523-lines.txt").read_text().splitlines()
    events = {n: parse_line(t) for n, t in enumerate(lines, start=1)}
    retract, crash, straggler = events[8], events[9], events[13]
    assert retract is not None and crash is not None and straggler is not None
    assert (retract.get("retracted_reqs"), retract.get("new_token_ratio")) == (3, 0.84)
    assert retract.get("mamba_num_gained") == 15
    assert (crash.get("process"), crash.get("pid"), crash.get("exit_code")) == (
        "scheduler_0",
        48213,
        -15,
    )
    assert (straggler.get("after_s"), straggler.get("pids")) == (15, "[48213]")
    oom = events[5]
    assert oom is not None and (oom.get("detail"), oom.get("exception")) == (
        "prefill",
        "RuntimeError",
    )
    ambiguous, choice = events[11], events[12]
    assert ambiguous is not None and ambiguous.get("argument") == "--cuda-graph-max-bs"
    assert ambiguous.get("detail") == "ambiguous_option" and ambiguous.get("prog") == "sglang serve"
    assert choice is not None and choice.get("detail") == "invalid_choice"
    assert choice.get("argument") == "--speculative-algorithm"


@pytest.mark.parametrize(
    ("line", "fatal"),
    [(11, True), (17, True), (19, True), (33, True), (41, True), (46, True)],
)
def test_sample_crash_lines_are_fatal(line: int, fatal: bool) -> None:
    text = (FIXTURES / "sglang-log-samples.txt").read_text().splitlines()[line - 1]
    event = parse_line(text)
    assert event is not None and event.kind == "error" and event.get("fatal") is fatal


def test_every_error_and_pressure_reason_is_declared() -> None:
    from tui.logs.events import PRESSURE_REASONS

    lines = (FIXTURES / "sglang-0523-lines.txt").read_text().splitlines()
    for text in lines:
        event = parse_line(text)
        if event is not None and event.kind == "error":
            assert event.get("reason") in ERROR_REASONS
        if event is not None and event.kind == "pressure":
            assert event.get("reason") in PRESSURE_REASONS


def test_an_arguments_line_is_never_an_error() -> None:
    # SGLang's arguments line names flags that read like errors (watchdog_timeout, the crash
    # dump folder, a served name): it is the launch's arguments whatever its values say.
    line = (
        "[2026-12-03 22:11:05] server_args=ServerArgs(model_path='Qwen/Qwen3.6-27B-FP8', "
        "port=30001, mem_fraction_static=0.93, watchdog_timeout=300, "
        "served_model_name='CUDA out of memory test', crash_dump_folder=None)"
    )
    event = parse_line(line)
    assert event is not None and event.kind == "server_args"
    assert event.fields == {
        "model_path": "Qwen/Qwen3.6-27B-FP8",
        "port": 30001,
        "mem_fraction_static": 0.93,
    }

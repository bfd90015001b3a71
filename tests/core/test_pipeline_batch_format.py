"""OpenAI Batch lines in, records out: named reasons, stable ids, one-line records."""

from __future__ import annotations

import json

import pytest

from tui.pipeline.batch_input import MAX_DEPTH, Prompt, parse_prompt, request_for
from tui.pipeline.batch_output import error_record, output_record, record_id

CHAT = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions"}
MESSAGES = [{"role": "user", "content": "hi"}]


def _line(obj: object) -> bytes:
    return json.dumps(obj).encode() + b"\n"


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        ({**CHAT, "custom_id": ""}, "field 'custom_id' must be a non-empty string"),
        ({**CHAT, "custom_id": 7}, "field 'custom_id' must be a non-empty string"),
        ({**CHAT, "custom_id": "x" * 600}, "is 600 characters: at most 512"),
        ({**CHAT, "method": "GET", "body": {}}, "field 'method' must be \"POST\""),
        ({**CHAT, "url": "/v1/embeddings", "body": {}}, "field 'url' must be one of"),
        ({**CHAT, "body": []}, "field 'body' must be an object"),
        ({**CHAT, "body": {"messages": []}}, "field 'body.messages' must be a non-empty list"),
        ({**CHAT, "body": {"messages": MESSAGES, "stream": True}}, "'body.stream' must be false"),
        ({**CHAT, "body": {"messages": MESSAGES, "max_tokens": 0}}, "'body.max_tokens' must be"),
        ({**CHAT, "url": "/v1/completions", "body": {"prompt": 5}}, "'body.prompt' must be"),
        ({"messages": [{"role": "user"}]}, "field 'messages'[0] must be an object with"),
        ({"text": "hi"}, "needs 'custom_id', 'url' and 'body' (OpenAI Batch)"),
        ([1, 2], "expected a JSON object, got list"),
    ],
)
def test_bad_lines_are_named(obj: object, reason: str) -> None:
    result = parse_prompt(_line(obj))
    assert isinstance(result, str) and reason in result


def test_bytes_and_nesting_are_bounded() -> None:
    assert parse_prompt(b"\xff\xfe{}\n") == "not UTF-8 (byte 0xff at column 1)"
    assert parse_prompt(b"[" * 100_000) == f"nested deeper than {MAX_DEPTH} levels"
    deep = {"messages": MESSAGES, "meta": json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)}
    assert parse_prompt(_line(deep)) == f"nested deeper than {MAX_DEPTH} levels"
    shallow = {"messages": MESSAGES, "meta": json.loads("[" * 60 + "]" * 60)}
    assert isinstance(parse_prompt(_line(shallow)), Prompt)  # many brackets, within the limit


def test_bare_lines_get_ids_from_their_content_alone() -> None:
    first = parse_prompt(b'{"messages": [{"role": "user", "content": "hi"}]}')
    spaced = parse_prompt(b'{ "messages" : [ {"content": "hi",  "role": "user"} ] }\n')
    other = parse_prompt(b'{"messages": [{"role": "user", "content": "hi!"}]}')
    assert isinstance(first, Prompt) and isinstance(spaced, Prompt) and isinstance(other, Prompt)
    assert first.custom_id == spaced.custom_id != other.custom_id
    assert first.custom_id.startswith("gf-") and len(first.custom_id) == 23 and first.derived


def test_the_request_fills_model_and_length_only_when_absent() -> None:
    prompt = parse_prompt(_line({**CHAT, "body": {"messages": MESSAGES}}))
    assert isinstance(prompt, Prompt)
    path, body = request_for(prompt, "m", 32)
    assert path == "/v1/chat/completions"
    assert json.loads(body) == {"messages": MESSAGES, "model": "m", "max_tokens": 32}
    own = Prompt("b", "/v1/completions", {"prompt": "x", "model": "z", "max_completion_tokens": 4})
    assert json.loads(request_for(own, "m", 32)[1]) == own.body


def test_a_record_is_one_openai_batch_line_with_our_fields_after() -> None:
    prompt = Prompt("q-17", "/v1/chat/completions", {"messages": MESSAGES})
    answer = {
        "id": "req-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "2, 3, 5"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4},
    }  # fmt: skip
    for content in (json.dumps(answer).encode(), json.dumps(answer, indent=2).encode()):
        line, tokens = output_record(prompt, 17, content, "http://s:1", 100.0, 0.5)
        assert tokens == 4 and line.endswith(b"\n") and line.count(b"\n") == 1
        record = json.loads(line)
        assert list(record)[:4] == ["id", "custom_id", "response", "error"]
        assert record["id"] == record_id("q-17") and record["custom_id"] == "q-17"
        assert record["response"] == {"status_code": 200, "request_id": "req-1", "body": answer}
        assert record["error"] is None and record["index"] == 17 and record["text"] == "2, 3, 5"
    with pytest.raises(KeyError):
        output_record(prompt, 1, b'{"no": "choices"}', "http://s:1", 0.0, 0.0)
    failed = json.loads(error_record("q-17", 17, "HTTP 400: bad", 4))
    assert failed["response"] is None and failed["error"]["message"] == "HTTP 400: bad"
    assert failed["custom_id"] == "q-17" and failed["attempts"] == 4

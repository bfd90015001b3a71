"""Prompt identity is the id: a changed prompts file is refused, or resumed by id when asked.

Real ``gpufleet generate`` runs against the fake OpenAI endpoint, which counts the requests it
receives: "generates exactly the new ids" is checked at the server, not only in the shards.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pipeline_helpers import (
    ProcessServer,
    generate_argv,
    openai_server,
    read_shards,
    requests_served,
    run_generate,
    write_batch,
    write_prompts,
)

from tui.pipeline.status import read_status


def _argv(tmp_path: Path, prompts: Path, server: ProcessServer, *extra: str) -> list[str]:
    return generate_argv(
        tmp_path, "--prompts", str(prompts), "--server", server.url, "--shard-size", "64", *extra
    )


def _ids_in_shards(out: Path) -> Counter[str]:
    return Counter(str(record["custom_id"]) for record in read_shards(out))


def _shard_bytes(out: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(out.glob("shard-*.jsonl"))}


def test_an_inserted_line_is_refused_then_generated_alone_by_id(
    tmp_path: Path, server: ProcessServer
) -> None:
    ids = [f"q{i}" for i in range(500)]
    prompts = write_batch(tmp_path / "p.jsonl", ids)
    out = tmp_path / "out"
    first = run_generate(_argv(tmp_path, prompts, server))
    assert first.returncode == 0, first.stderr
    served, shards = requests_served(server), _shard_bytes(out)
    assert served == 500
    status_before = (tmp_path / "status.json").read_bytes()

    write_batch(prompts, ["inserted", *ids])  # one line at the top: every line number moves
    refused = run_generate(_argv(tmp_path, prompts, server))
    assert refused.returncode == 2
    assert "its prompts changed since this output was started" in refused.stderr
    assert "(1 new id(s), 0 removed, order kept)" in refused.stderr
    assert "--resume-by-id" in refused.stderr and "Traceback" not in refused.stderr
    # Nothing sent, nothing written: not a shard, not even the status document.
    assert requests_served(server) == served and _shard_bytes(out) == shards
    assert (tmp_path / "status.json").read_bytes() == status_before

    resumed = run_generate(_argv(tmp_path, prompts, server, "--resume-by-id"))
    assert resumed.returncode == 0, resumed.stderr
    assert "500 done, 1 to generate" in resumed.stderr
    assert requests_served(server) == served + 1
    counts = _ids_in_shards(out)
    assert set(counts) == {"inserted", *ids} and max(counts.values()) == 1
    record = next(r for r in read_shards(out) if r["custom_id"] == "inserted")
    assert "about inserted" in str(record["text"])  # the answer belongs to its own prompt
    status = read_status(tmp_path / "status.json")
    assert status is not None and status.done == status.total == 501

    # The accepted file is the job's now: the next run needs no flag and sends nothing.
    again = run_generate(_argv(tmp_path, prompts, server))
    assert again.returncode == 0 and "501 done, 0 to generate" in again.stderr
    assert requests_served(server) == served + 1


def test_resume_by_id_after_removal_reorder_and_insert(
    tmp_path: Path, server: ProcessServer
) -> None:
    ids = [f"q{i}" for i in range(300)]
    prompts = write_batch(tmp_path / "p.jsonl", ids)
    out = tmp_path / "out"
    assert run_generate(_argv(tmp_path, prompts, server)).returncode == 0
    served = requests_served(server)
    kept = list(reversed(ids[50:]))  # 50 removed, the rest reversed
    changed = [*kept[:100], "new-a", *kept[100:200], "new-b", *kept[200:], "new-c"]
    write_batch(prompts, changed)
    result = run_generate(_argv(tmp_path, prompts, server, "--resume-by-id"))
    assert result.returncode == 0, result.stderr
    assert "3 new id(s), 50 removed (50 of them done), order changed" in result.stderr
    assert "250 done, 3 to generate" in result.stderr
    assert requests_served(server) == served + 3
    counts = _ids_in_shards(out)
    assert set(counts) == set(ids) | {"new-a", "new-b", "new-c"} and max(counts.values()) == 1
    # Removed ids that come back are still done: nothing is sent for them.
    write_batch(prompts, [*ids[:10], *changed])
    back = run_generate(_argv(tmp_path, prompts, server, "--resume-by-id"))
    assert back.returncode == 0 and "263 done, 0 to generate" in back.stderr
    assert requests_served(server) == served + 3


def test_a_cut_file_reports_the_removed_ids_and_derived_ids_survive_an_insert(
    tmp_path: Path, server: ProcessServer
) -> None:
    """The issue's other two cases, in the older bare format (ids derived from the content)."""
    prompts = write_prompts(tmp_path / "p.jsonl", 201)
    assert run_generate(_argv(tmp_path, prompts, server)).returncode == 0
    served = requests_served(server)
    lines = prompts.read_text().splitlines(keepends=True)
    prompts.write_text("".join(lines[:100]))
    refused = run_generate(_argv(tmp_path, prompts, server))
    assert refused.returncode == 2 and "0 new id(s), 101 removed" in refused.stderr
    cut = run_generate(_argv(tmp_path, prompts, server, "--resume-by-id"))
    assert cut.returncode == 0 and "100 done, 0 to generate" in cut.stderr
    assert "101 removed (101 of them done)" in cut.stderr
    status = read_status(tmp_path / "status.json")
    assert status is not None and status.total == status.done == 100  # not "201 done"

    prompts.write_text(json.dumps({"prompt": "a new first line"}) + "\n" + "".join(lines[:100]))
    inserted = run_generate(_argv(tmp_path, prompts, server, "--resume-by-id"))
    assert inserted.returncode == 0 and "100 done, 1 to generate" in inserted.stderr
    assert requests_served(server) == served + 1
    newest = [r for r in read_shards(tmp_path / "out") if "a new first line" in str(r["text"])]
    assert len(newest) == 1 and str(newest[0]["custom_id"]).startswith("gf-")


def test_repeated_ids_are_bad_lines_but_repeated_bare_prompts_are_distinct(
    tmp_path: Path, server: ProcessServer
) -> None:
    prompts = write_batch(tmp_path / "p.jsonl", ["a", "b", "a"])
    with open(prompts, "a") as handle:
        handle.write('{"prompt": "same"}\n' * 3)
    result = run_generate(_argv(tmp_path, prompts, server))
    assert result.returncode == 0, result.stderr
    assert "skipping line 3: custom_id 'a' repeats an earlier line's" in result.stderr
    counts = _ids_in_shards(tmp_path / "out")
    derived = sorted(i for i in counts if i.startswith("gf-"))
    assert len(counts) == 5 and counts["a"] == 1 and len(derived) == 3
    base = min(derived, key=len)
    assert derived == sorted([base, f"{base}-2", f"{base}-3"])


def test_a_job_with_nothing_done_follows_its_edited_file(
    tmp_path: Path, server: ProcessServer
) -> None:
    """No output to protect yet (the fleet never answered): an edit is taken without the flag."""
    prompts = write_batch(tmp_path / "p.jsonl", [f"q{i}" for i in range(50)])
    dead = openai_server()  # never started
    argv = generate_argv(tmp_path, "--prompts", str(prompts), "--fleet-timeout", "0.5")
    assert run_generate([*argv, "--server", dead.url]).returncode == 1
    write_batch(prompts, ["first", *(f"q{i}" for i in range(50))])
    result = run_generate([*argv, "--server", server.url])
    assert result.returncode == 0, result.stderr
    assert "nothing was done yet: the job now follows the changed --prompts" in result.stderr
    assert "0 done, 51 to generate" in result.stderr and requests_served(server) == 51

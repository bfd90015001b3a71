"""``engine.sglang_version``: any release gpufleet has a table for, or ``auto``, resolved from
``engine.python`` (a real interpreter, run here) or a running server's ``/server_info``.

The interpreter is this one, given a ``PYTHONPATH`` that holds a stand-in ``sglang`` package
(whose ``__init__`` fails if run: the version is read without importing SGLang) or a real
release's wheel; the server is a real HTTP server on loopback.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from flagtable_helpers import ensure_reference
from servers_helpers import Route, canned_server, json_reply

from tui.ops.cli import apply as apply_cli
from tui.profiles import ProfileError, profile_from_dict, sglang_release
from tui.profiles.cli import main as profile_main
from tui.profiles.flag_check import launch_problems
from tui.profiles.sglang_release import (
    ReleaseError,
    forget,
    installed_release,
    served_release,
    target_release,
)
from tui.sglang.flagtable.reference import wheel_path
from tui.state.fleet_state import read_records
from tui.ui.tuning.candidate import FormValues, build_candidate

KNOWN = "0.5.17, 0.5.18, 0.5.19, 0.5.20, 0.5.21, 0.5.22, 0.5.23"


@pytest.fixture()
def closed_port() -> Iterator[int]:
    """A loopback port bound here and never listened on: a connection to it is refused, and no
    other process can take it while the test runs."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def _site(tmp: Path, version: str | None, *, init_version: str | None = None) -> Path:
    """A directory holding a stand-in ``sglang`` package: ``_version.py`` says ``version`` (None:
    no such file); its ``__init__`` fails unless ``init_version`` is given, which it then sets."""
    site = tmp / f"site-{version}-{init_version}"
    package = site / "sglang"
    package.mkdir(parents=True)
    if init_version is None:
        (package / "__init__.py").write_text('raise RuntimeError("sglang imported")\n')
    else:
        (package / "__init__.py").write_text(f"__version__ = {init_version!r}\n")
    if version is not None:
        (package / "_version.py").write_text(
            f"from __future__ import annotations\n__version__ = version = {version!r}\n"
        )
    return site


def _doc(python: str, site: Path | None, version: str = "auto", **flags: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "engine": {"kind": "sglang", "python": python, "sglang_version": version},
        "fleet": {"gpus": [0], "base_port": 31990},
        "env": {"PYTHONPATH": str(site)} if site is not None else {},
        "server": {"model_path": "Qwen/Qwen3.6-27B-FP8", "extra_flags": flags},
    }


def _problems(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ProfileError) as err:
        profile_from_dict(doc, "t")
    return [str(p) for p in err.value.problems]


def test_any_known_release_judges_by_its_own_table() -> None:
    ok = profile_from_dict(_doc("python3", None, "0.5.17", cuda_graph_max_bs=256), "t")
    assert target_release(ok) == "0.5.17" and launch_problems(ok) == []
    assert _problems(_doc("python3", None, "0.5.23", cuda_graph_max_bs=256)) == [
        "server.extra_flags.cuda_graph_max_bs = 256: --cuda-graph-max-bs is ambiguous in SGLang "
        "0.5.23 (it exits 2): could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"
    ]
    legacy = _doc("python3", None, "0.5.19")
    legacy["engine"]["legacy_mamba_flag"] = True
    legacy["server"]["mamba_radix_cache_strategy"] = "extra_buffer"
    assert target_release(profile_from_dict(legacy, "t")) == "0.5.19"
    legacy["server"]["mamba_radix_cache_strategy"] = "extra_buffer_lazy"  # a choice of 0.5.19
    assert launch_problems(profile_from_dict(legacy, "t")) == []
    legacy["server"]["mamba_radix_cache_strategy"] = "extra_buffer"
    legacy["engine"]["sglang_version"] = "0.5.20"
    assert _problems(legacy) == [
        "engine.legacy_mamba_flag = 'extra_buffer': emits --mamba-scheduler-strategy, the name "
        "SGLang used before the rename: SGLang 0.5.20 has no flag --mamba-scheduler-strategy (it "
        "exits 2: unrecognized arguments); did you mean --mamba-radix-cache-strategy?"
    ]


def test_a_release_without_a_table_is_refused_naming_the_known_ones() -> None:
    assert _problems(_doc("python3", None, "0.5.16")) == [
        f"engine.sglang_version = '0.5.16': no SGLang flag table for this version (gpufleet has: "
        f"{KNOWN}; or 'auto': the release engine.python has)"
    ]


def test_auto_reads_engine_python_without_importing_sglang(tmp_path: Path) -> None:
    old = _doc(sys.executable, _site(tmp_path, "0.5.17"), cuda_graph_max_bs=256)
    profile = profile_from_dict(old, "t")
    assert profile.engine.sglang_version == "auto" and target_release(profile) == "0.5.17"
    new = _doc(sys.executable, _site(tmp_path, "0.5.23"), cuda_graph_max_bs=256)
    (problem,) = _problems(new)
    assert problem.startswith("server.extra_flags.cuda_graph_max_bs = 256: --cuda-graph-max-bs ")
    assert "ambiguous in SGLang 0.5.23" in problem


def test_auto_reads_a_real_release_on_the_path() -> None:
    """The interpreter finds SGLang 0.5.17's own wheel (a zip) on PYTHONPATH and reads its
    ``_version.py``, as ``import sglang`` would have found it."""
    wheel = wheel_path("0.5.17", ensure_reference("0.5.17"))
    assert installed_release(sys.executable, {"PYTHONPATH": str(wheel)}) == "0.5.17"


def test_auto_imports_sglang_only_without_a_version_file(tmp_path: Path) -> None:
    site = _site(tmp_path, None, init_version="0.5.18")
    assert installed_release(sys.executable, {"PYTHONPATH": str(site)}) == "0.5.18"


def test_auto_refuses_a_release_without_a_table(tmp_path: Path) -> None:
    (problem,) = _problems(_doc(sys.executable, _site(tmp_path, "0.5.16")))
    assert problem == (
        f"engine.sglang_version = 'auto': {sys.executable} has SGLang 0.5.16, which gpufleet has "
        f"no flag table for (known: {KNOWN})"
    )


def test_auto_without_sglang_or_server_is_one_line_naming_the_field(
    tmp_path: Path, closed_port: int
) -> None:
    missing = str(tmp_path / "no-such-python")
    doc = _doc(missing, None)
    doc["fleet"]["base_port"] = closed_port
    (problem,) = _problems(doc)
    assert problem == (
        f"engine.sglang_version = 'auto': {missing} could not be run (No such file or "
        f"directory), and no server on 127.0.0.1 port(s) {closed_port} reports one on "
        f"/server_info; set it to one of {KNOWN}"
    )
    doc = _doc(sys.executable, tmp_path / "empty")
    doc["fleet"]["base_port"] = closed_port
    (problem,) = _problems(doc)
    assert problem.startswith(
        f"engine.sglang_version = 'auto': {sys.executable} could not read SGLang's version "
        "(No module named 'sglang'), and no server on 127.0.0.1"
    )
    assert "\n" not in problem


def test_a_hung_interpreter_is_given_up_on(tmp_path: Path) -> None:
    site = tmp_path / "hang" / "sglang"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    # A _version.py that never returns: the probe is killed at its deadline.
    (site / "_version.py").write_text("import threading\nthreading.Event().wait()\n")
    with pytest.raises(ReleaseError, match=r"gave no SGLang version within 0.5 s"):
        installed_release(sys.executable, {"PYTHONPATH": str(site.parent)}, timeout_s=0.5)


def test_auto_falls_back_to_a_running_server(tmp_path: Path, closed_port: int) -> None:
    info = json.dumps({"version": "0.5.19", "internal_states": [{}], "max_running_requests": 8})
    routes: dict[str, Route] = {"/server_info": json_reply(info)}
    with canned_server(routes) as server:
        assert served_release("127.0.0.1", [server.port]) == (server.port, "0.5.19")
        doc = _doc(str(tmp_path / "no-such-python"), None, cuda_graph_max_bs=256)
        doc["fleet"]["base_port"] = server.port
        profile = profile_from_dict(doc, "t")  # 0.5.19 has the alias
        assert target_release(profile) == "0.5.19"
    # The older spelling, on a server without /server_info.
    with canned_server({"/get_server_info": json_reply(json.dumps({"version": "0.5.23"}))}) as s:
        assert served_release("127.0.0.1", [closed_port, s.port]) == (s.port, "0.5.23")


def test_a_resolution_is_remembered(tmp_path: Path) -> None:
    site = _site(tmp_path, "0.5.21")
    runs = tmp_path / "runs"
    version_file = site / "sglang" / "_version.py"
    version_file.write_text(
        f"with open({str(runs)!r}, 'a') as f:\n    f.write('x')\n__version__ = '0.5.21'\n"
    )
    profile = profile_from_dict(_doc(sys.executable, site), "t")
    assert target_release(profile) == target_release(profile) == "0.5.21"
    assert runs.read_text() == "x"  # validated three times, asked once
    forget()
    assert target_release(profile) == "0.5.21" and runs.read_text() == "xx"


def test_a_stale_resolution_is_given_at_once_and_asked_again_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tuning form validates on the console's event loop: past ``REMEMBER_S`` it gets the
    remembered release at once while the interpreter is asked again in the background (before,
    the keystroke waited for the probe: up to 30 s for an install without ``_version.py``)."""
    site = _site(tmp_path, "0.5.21")
    profile = profile_from_dict(_doc(sys.executable, site), "t")
    assert target_release(profile) == "0.5.21"
    monkeypatch.setattr(sglang_release, "REMEMBER_S", 0.0)
    gate = tmp_path / "gate"
    # The upgraded install answers only once the gate exists (20 s at most).
    (site / "sglang" / "_version.py").write_text(
        "import os, time\n"
        "deadline = time.monotonic() + 20\n"
        f"while not os.path.exists({str(gate)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
        "__version__ = '0.5.22'\n"
    )
    assert target_release(profile) == "0.5.21"  # not waiting for the probe behind the gate
    gate.touch()
    deadline = time.monotonic() + 30
    while target_release(profile) != "0.5.22":
        assert time.monotonic() < deadline, "the background probe never answered"
        time.sleep(0.02)


def test_a_simulator_profile_auto_is_the_simulated_release() -> None:
    doc = _doc(str(Path("/no/such/python")), None)
    doc["engine"]["kind"] = "sim"
    assert target_release(profile_from_dict(doc, "t")) == "0.5.23"


def test_validate_form_and_preflight_only_use_the_same_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = _site(tmp_path, "0.5.17"), _site(tmp_path, "0.5.23")
    path = tmp_path / "p.toml"
    path.write_text(tomli_w.dumps(_doc(sys.executable, old, cuda_graph_max_bs=256)))
    assert profile_main(["validate", str(path)]) == 0
    path.write_text(tomli_w.dumps(_doc(sys.executable, new, cuda_graph_max_bs=256)))
    assert profile_main(["validate", str(path)]) == 1
    assert "ambiguous in SGLang 0.5.23" in capsys.readouterr().err
    assert apply_cli.main([str(path), "--preflight-only"]) == 2
    assert "ambiguous in SGLang 0.5.23" in capsys.readouterr().err
    assert read_records() == {}
    running = profile_from_dict(_doc(sys.executable, old), "t")
    values = FormValues((), "--cuda-graph-max-bs 256", "t2", None)
    assert build_candidate(running, values).profile is not None
    newer = profile_from_dict(_doc(sys.executable, new), "t")
    refused = build_candidate(newer, values)
    assert refused.profile is None
    assert "ambiguous in SGLang 0.5.23" in refused.problems["extra_flags"][0]

"""Where profiles live: the console saves to the user's configuration, never the source tree;
the pickers see those beside the shipped ones, and only those whose engine is the fleet's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from repo_paths import ROOT as REPO

from tui import paths
from tui.ops.service import FleetOps
from tui.profiles import list_profiles, load_named, load_profile, profile_engine

SHIPPED = REPO / "profiles"


@pytest.fixture()
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    """As ``make demo`` runs: from the source tree, no profiles directory named."""
    monkeypatch.chdir(REPO)
    monkeypatch.delenv(paths.PROFILES_ENV, raising=False)


def test_the_config_directory_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(paths.CONFIG_ENV, raising=False)
    monkeypatch.delenv(paths.PROFILES_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert paths.user_profiles_dir() == tmp_path / "xdg" / "gpufleet" / "profiles"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert paths.config_dir() == Path.home() / ".config" / "gpufleet"
    monkeypatch.setenv(paths.PROFILES_ENV, str(tmp_path / "mine"))
    assert paths.user_profiles_dir() == tmp_path / "mine"  # an explicit directory is used


def test_a_profile_saved_from_the_console_goes_to_the_users_config(in_repo: None) -> None:
    before = sorted(p.name for p in SHIPPED.iterdir())
    ops = FleetOps(load_named("sim-baseline"), by="console")
    tuned = replace(load_named("sim-aggressive"), name="sim-tuned-here")
    path = ops.save_profile(tuned)
    assert path == paths.config_dir() / "profiles" / "sim-tuned-here.toml"
    assert sorted(p.name for p in SHIPPED.iterdir()) == before  # the source tree untouched
    assert load_named("sim-tuned-here").server == tuned.server
    names = [p.stem for p in list_profiles()]
    assert "sim-tuned-here" in names and "sim-baseline" in names
    assert "sim-tuned-here" in ops.profile_names()


def test_a_saved_profile_hides_a_shipped_one_of_the_same_name(in_repo: None) -> None:
    ops = FleetOps(load_named("sim-baseline"))
    mine = replace(load_named("sim-baseline"), note="my own baseline")
    ops.save_profile(mine)
    assert load_named("sim-baseline").note == "my own baseline"
    assert [p.stem for p in list_profiles()].count("sim-baseline") == 1


def test_the_pickers_offer_only_profiles_of_the_fleets_engine(in_repo: None) -> None:
    sim = FleetOps(load_named("sim-baseline")).profile_names()
    assert "sim-aggressive" in sim and not any(n.startswith("b200") for n in sim)
    real = FleetOps(load_profile(SHIPPED / "b200-baseline.toml")).profile_names()
    assert "b200-aggressive" in real and not any(n.startswith("sim-") for n in real)
    assert {"sim-baseline", "b200-baseline"} <= set(FleetOps(None).profile_names())


def test_the_engine_is_read_without_validating_the_rest(tmp_path: Path) -> None:
    assert profile_engine(SHIPPED / "sim-baseline.toml") == "sim"
    assert profile_engine(SHIPPED / "b200-baseline.toml") == "sglang"
    bare = tmp_path / "bare.toml"
    bare.write_text('name = "x"\n')
    assert profile_engine(bare) == "sglang"  # the default engine
    broken = tmp_path / "broken.toml"
    broken.write_text("[engine\n")
    assert profile_engine(broken) is None

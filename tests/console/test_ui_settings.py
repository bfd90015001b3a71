"""The settings file's ``[console] readonly`` and the ``--readonly`` flags of console and demo."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui import paths
from tui.state.fleet_state import read_records
from tui.ui import cli as console_cli
from tui.ui import demo_cli
from tui.ui.settings import (
    ConsoleSettings,
    SettingsError,
    load_console_settings,
    resolve_readonly,
)


def write_settings(text: str) -> Path:
    path = paths.settings_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_settings_file_lives_in_the_config_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(paths.CONFIG_ENV)
    monkeypatch.setenv("XDG_CONFIG_HOME", "/xdg")
    assert paths.settings_file() == Path("/xdg/gpufleet/settings.toml")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert paths.settings_file() == Path.home() / ".config" / "gpufleet" / "settings.toml"
    monkeypatch.setenv(paths.CONFIG_ENV, "/elsewhere")
    assert paths.settings_file() == Path("/elsewhere/settings.toml")


def test_no_file_means_writable() -> None:
    assert not paths.settings_file().exists()
    assert load_console_settings() == ConsoleSettings(readonly=False)
    assert resolve_readonly(None) is False


def test_readonly_true_in_the_console_table() -> None:
    write_settings("[console]\nreadonly = true\n\n[other]\nkept = 'for others'\n")
    assert load_console_settings().readonly is True
    assert resolve_readonly(None) is True
    assert resolve_readonly(False) is False  # --no-readonly wins
    write_settings("[console]\nreadonly = false\n")
    assert resolve_readonly(True) is True


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[console]\nreadonly = "yes"\n', "console.readonly = 'yes': must be true or false"),
        (
            "[console]\nreadonyl = true\n",
            "console.readonyl is not a setting (allowed: readonly, bell)",
        ),
        ("[console]\nbell = 1\n", "console.bell = 1: must be true or false"),
        ("console = 3\n", "console must be a table"),
        ("[console\nreadonly = true\n", "not valid TOML"),
    ],
)
def test_a_bad_settings_file_names_the_file_and_the_key(text: str, message: str) -> None:
    path = write_settings(text)
    with pytest.raises(SettingsError) as error:
        load_console_settings()
    assert str(error.value).startswith(f"{path}: ")
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_console_takes_readonly_from_the_settings_and_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ``gpufleet console --profile`` hands the console, for each flag and setting."""
    seen: list[bool] = []

    def record(*args: object, readonly: bool = False, **kwargs: object) -> int:
        seen.append(readonly)
        return 0

    monkeypatch.setattr(console_cli, "run_console", record)
    assert console_cli.main(["--profile", "sim-baseline"]) == 0
    assert console_cli.main(["--profile", "sim-baseline", "--readonly"]) == 0
    write_settings("[console]\nreadonly = true\n")
    assert console_cli.main(["--profile", "sim-baseline"]) == 0
    assert console_cli.main(["--profile", "sim-baseline", "--no-readonly"]) == 0
    assert seen == [False, True, True, False]


@pytest.mark.parametrize("command", ["console", "demo"])
def test_a_bad_settings_file_stops_the_command_before_anything_starts(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_settings('[console]\nreadonly = "sometimes"\n')
    main = console_cli.main if command == "console" else demo_cli.main
    assert main(["--profile", "sim-baseline"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"gpufleet {command}: ") and "console.readonly" in err
    assert len(err.splitlines()) == 1
    assert read_records() == {}  # the demo launched nothing

"""Settings and the policy file: validated at start, errors that name the file, the policy and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config import load_policy_file, load_settings
from bot.durations import format_duration, parse_duration
from bot.errors import ConfigError


def test_a_toml_policy_file_loads_durations_and_steps(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text(
        '[defaults]\ntimeout_ms = "4h"\nroute = { channel = "C0APPROVALS" }\n'
        '[policies.prod]\nroute = { channel = "C0DEPLOY" }\non_timeout = "error"\n'
        'escalate = [{ after = "10m", channel = "C0ONCALL", mention = ["S0ONCALL"] }]\n'
    )
    loaded = load_policy_file(path)
    assert loaded.defaults.timeout_ms == 4 * 3_600_000
    prod = loaded.policies["prod"]
    assert prod.escalate is not None and prod.escalate[0].after_ms == 600_000
    assert prod.escalate[0].mention == ["S0ONCALL"]


def test_a_yaml_policy_file_loads_too(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text("policies:\n  quick:\n    timeout_ms: 90s\n    responders: {users: [U0ALICE]}\n")
    assert load_policy_file(path).policies["quick"].timeout_ms == 90_000


def test_a_bad_field_names_the_file_the_policy_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[policies.prod]\nescalate = [{ after_ms = 5, channel = "C1", user = "U1" }]\n')
    with pytest.raises(ConfigError) as caught:
        load_policy_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: policies.prod.escalate.0")
    assert "exactly one of channel or user" in message


def test_an_unknown_policy_field_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[policies.prod]\ntimeuot_ms = 5\n")
    with pytest.raises(ConfigError, match=r"policies\.prod\.timeuot_ms"):
        load_policy_file(path)


def test_a_file_that_is_not_toml_says_so(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("[policies\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_policy_file(path)


def test_a_missing_policy_file_names_the_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_ASK_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(ConfigError, match="SLACK_ASK_CONFIG: cannot read"):
        load_settings()


def test_a_prefix_with_braces_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    # Braces in the prefix would move every key into the prefix's hash slot, away from reply_to's.
    monkeypatch.setenv("SLACK_ASK_PREFIX", "{slack-ask}")
    with pytest.raises(ConfigError, match="SLACK_ASK_PREFIX"):
        load_settings()


def test_the_api_url_works_with_or_without_its_trailing_slash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9/api")
    assert load_settings().slack_api_url == "http://127.0.0.1:9/api/"


@pytest.mark.parametrize(
    ("text", "ms"), [("90s", 90_000), ("10m", 600_000), ("2h", 7_200_000), ("1d", 86_400_000), ("1500", 1500)]
)
def test_durations_read_as_the_protocol_writes_them(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


def test_a_bad_duration_says_what_is_accepted() -> None:
    with pytest.raises(ValueError, match="90s, 10m, 2h, 1d"):
        parse_duration("soon")


def test_durations_print_short() -> None:
    assert format_duration(93_000) == "1m 33s"

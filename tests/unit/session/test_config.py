"""Launch settings, config options and modes (pure), and agy discovery parsing."""

from __future__ import annotations

import os

import pytest

from agybridge.acp import codec, models
from agybridge.agy import build_argv
from agybridge.agy.discovery import ModelInfo, parse_agents, parse_models
from agybridge.config import ConfigError, Settings, setting_rows
from agybridge.session.config import (
    Catalog,
    ConfigValueError,
    LaunchSettings,
    apply_option,
    config_options,
    mode_state,
    settings_from_env,
    settings_from_meta,
    with_setting,
)

from ...acp_wire import WireValidator

CATALOG = Catalog(
    models=(
        ModelInfo("gemini-3.7-flash-high", "Gemini 3.7 Flash (High)"),
        ModelInfo("claude-opus-4-6-thinking", "Claude Opus 4.6 (Thinking)"),
    ),
    agents=("reviewer",),
)

# (mode, expected flags beyond the fixed ones)
MODE_FLAGS = [
    ("safe", ["--disable-slash-commands"]),
    ("autonomous", ["--dangerously-skip-permissions", "--sandbox", "--disable-slash-commands"]),
    ("autonomous-unsandboxed", ["--dangerously-skip-permissions", "--disable-slash-commands"]),
    # agy ignores --mode plan when slash expansion is disabled (tiezbro 1.1.14 stderr).
    ("plan", ["--mode=plan"]),
    ("accept-edits", ["--mode=accept-edits", "--disable-slash-commands"]),
]


@pytest.mark.parametrize(("mode", "flags"), MODE_FLAGS)
def test_modes_become_agy_flags(mode: str, flags: list[str]) -> None:
    """Each mode launches agy with exactly its documented flags."""
    spec = with_setting(LaunchSettings(), "mode", mode).launch_spec("/w")
    argv = build_argv("agy", spec)
    fixed = [
        "agy",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--print-timeout",
        "0",
        "--add-dir",
        "/w",
    ]
    assert argv[: len(fixed)] == fixed
    assert sorted(argv[len(fixed) :]) == sorted(flags)


def test_model_effort_agent_and_resume_reach_argv() -> None:
    """Chosen model, effort and agent, and the resumed conversation, are on argv."""
    settings = LaunchSettings(model="gemini-3.7-flash-high", effort="high", agent="reviewer")
    argv = build_argv("agy", settings.launch_spec("/w", ("/extra",), "conv-1"))
    assert argv[argv.index("--conversation") + 1] == "conv-1"
    assert "--add-dir" in argv and "/extra" in argv
    for flag in ("--model=gemini-3.7-flash-high", "--effort=high", "--agent=reviewer"):
        assert flag in argv


def test_options_offer_discovered_models_and_keep_the_current_one() -> None:
    """The model option lists discovered models; a configured model that
    discovery did not report still shows."""
    options = {o.id: o for o in config_options(LaunchSettings(model="my-model"), CATALOG)}
    assert [o.category for o in options.values()] == ["mode", "model", "thought_level", "_agent"]
    values = [c.value for c in options["model"].options]
    assert values == ["default", "gemini-3.7-flash-high", "claude-opus-4-6-thinking", "my-model"]
    assert options["model"].current_value == "my-model"


def test_no_agent_option_without_agents() -> None:
    """Nothing to choose, nothing offered."""
    assert [o.id for o in config_options(LaunchSettings(), Catalog())] == [
        "mode",
        "model",
        "effort",
    ]


def test_options_and_modes_validate_against_the_schema() -> None:
    """The session/new answer with options and modes is schema-valid."""
    validator = WireValidator()
    validator.feed(
        "c2a",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/new",
            "params": {"cwd": "/w", "mcpServers": []},
        },
    )
    response = models.NewSessionResponse(
        session_id="s",
        modes=mode_state(LaunchSettings()),
        config_options=config_options(LaunchSettings(), CATALOG),
    )
    validator.feed("a2c", {"jsonrpc": "2.0", "id": 1, "result": codec.unstructure(response)})
    assert validator.problems == []


@pytest.mark.parametrize(
    ("config_id", "value", "message"),
    [
        ("model", "nope", "'nope' is not a value of 'model'"),
        ("effort", "extreme", "'extreme' is not a value of 'effort'"),
        ("mode", "yolo", "'yolo' is not a value of 'mode'"),
        ("colour", "red", "unknown configId 'colour'"),
    ],
)
def test_apply_option_rejects_what_is_not_offered(config_id: str, value: str, message: str) -> None:
    """Only offered values are accepted; the error names the choices."""
    with pytest.raises(ConfigValueError, match=message):
        apply_option(LaunchSettings(), config_id, value, CATALOG)


@pytest.mark.parametrize(
    ("config_id", "value"),
    [("jsonSchema", "x" * 200_000), ("printTimeout", "1h" * 100_000)],
)
def test_a_value_too_long_for_agy_argv_is_refused(config_id: str, value: str) -> None:
    """One argument of agy's command line holds at most 128 KiB (Linux
    MAX_ARG_STRLEN): a longer value is refused when it is set, saying so;
    accepted, every later spawn failed with "Argument list too long"."""
    with pytest.raises(ConfigValueError, match="too long"):
        apply_option(LaunchSettings(), config_id, value, CATALOG)
    with pytest.raises(ConfigValueError, match="too long"):
        settings_from_meta(LaunchSettings(), {config_id: value})


def test_apply_option_changes_one_setting() -> None:
    """Choosing a value changes that setting; "default" clears it."""
    chosen = apply_option(LaunchSettings(), "model", "gemini-3.7-flash-high", CATALOG)
    assert chosen.model == "gemini-3.7-flash-high"
    assert apply_option(chosen, "model", "default", CATALOG).model is None
    assert apply_option(chosen, "mode", "plan", CATALOG).mode == "plan"


def test_env_defaults_and_aliases() -> None:
    """AGYBRIDGE_* set defaults; agy-acp-map's AGY_ACP_* work with a warning."""
    settings, warnings = settings_from_env(
        {
            "AGYBRIDGE_MODEL": "m1",
            "AGY_ACP_EFFORT": "low",
            "AGY_ACP_SAFETY": "auto",
            "AGY_ACP_DISABLE_SLASH_COMMANDS": "0",
            "AGYBRIDGE_PRINT_TIMEOUT": "30m",
        }
    )
    assert settings == LaunchSettings(
        model="m1", effort="low", mode="autonomous", slash_commands=True, print_timeout="30m"
    )
    assert len(warnings) == 3 and all("AGY_ACP_" in w for w in warnings)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"AGYBRIDGE_EFFORT": "extreme"}, "AGYBRIDGE_EFFORT: effort must be"),
        ({"AGYBRIDGE_SANDBOX": "maybe"}, "AGYBRIDGE_SANDBOX: sandbox must be true or false"),
        ({"AGY_ACP_SAFETY": "yolo"}, "AGY_ACP_SAFETY: safety must be"),
        ({"AGYBRIDGE_PRINT_TIMEOUT": "soon"}, "must be a Go duration"),
        ({"AGYBRIDGE_MODEL": "--evil"}, "must not start with '-'"),
    ],
)
def test_bad_env_values_stop_start_up(env: dict[str, str], message: str) -> None:
    """A bad launch default is a start-up error naming the variable."""
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)


def test_default_staging_dir_is_in_the_state_area() -> None:
    """The default staging base is the bridge's own state directory, not a project."""
    staging_dir = Settings.from_env({"AGYBRIDGE_LOG_FILE": ""}).staging_dir
    assert staging_dir.endswith(os.path.join("agybridge", "staging"))
    assert Settings.from_env({"AGYBRIDGE_STAGING_DIR": "/x"}).staging_dir == "/x"


def test_session_new_meta_overrides_defaults() -> None:
    """session/new _meta may carry the same launch keys."""
    settings = settings_from_meta(
        LaunchSettings(model="m1"),
        {"model": "m2", "mode": "plan", "jsonSchema": {"type": "object"}},
    )
    assert (settings.model, settings.mode) == ("m2", "plan")
    assert settings.json_schema == '{"type": "object"}'
    with pytest.raises(ConfigValueError, match=r"_meta\.effort"):
        settings_from_meta(LaunchSettings(), {"effort": "huge"})


def test_settings_survive_the_store_round_trip() -> None:
    """What the session index keeps restores the same settings."""
    settings = LaunchSettings(
        model="m",
        effort="high",
        mode="autonomous",
        sandbox=False,
        slash_commands=True,
        print_timeout="1h",
    )
    assert LaunchSettings.from_store(settings.to_store()) == settings


MODELS_OUTPUT = """Fetching available models...
gemini-3.8-flash-high\tGemini 3.8 Flash (High)
gemini-3.1-pro-low\tGemini 3.1 Pro (Low)

I1130 12:00:00.000000 1 log.go:1] noise
gpt-oss-120b-medium\tGPT-OSS 120B (Medium)
gemini-3.8-flash-high\tGemini 3.8 Flash (High)
"""


def test_parse_models() -> None:
    """TAB rows in order, status and glog lines skipped, duplicates dropped."""
    assert parse_models(MODELS_OUTPUT) == [
        ModelInfo("gemini-3.8-flash-high", "Gemini 3.8 Flash (High)"),
        ModelInfo("gemini-3.1-pro-low", "Gemini 3.1 Pro (Low)"),
        ModelInfo("gpt-oss-120b-medium", "GPT-OSS 120B (Medium)"),
    ]


def test_parse_models_bare_slugs_and_columns() -> None:
    """Older builds print bare slugs or space-aligned columns."""
    assert parse_models("gemini-a\ngemini-b   Gemini B\n") == [
        ModelInfo("gemini-a", "gemini-a"),
        ModelInfo("gemini-b", "Gemini B"),
    ]


def test_parse_agents() -> None:
    """One agent per line; the signed-out message is not an agent."""
    assert parse_agents("deepseek-proxy\nreviewer\tReviews\n") == ["deepseek-proxy", "reviewer"]
    assert parse_agents("You are not logged into Antigravity.\n") == []


def test_setting_rows_name_each_value_and_where_it_came_from() -> None:
    """``_agybridge/settings/options``: the value in effect, spelt as in the
    environment, and its source (ours, agy-acp-map's name, a safety tier)."""
    env = {"AGY_ACP_LOG": "/tmp/x.log", "AGYBRIDGE_SAFETY": "autonomous", "AGYBRIDGE_TRACE": "1"}
    rows = {row["name"]: row for row in setting_rows(Settings.from_env(env), env)}
    assert rows["AGYBRIDGE_LOG_FILE"]["value"] == "/tmp/x.log"
    assert rows["AGYBRIDGE_LOG_FILE"]["source"] == "AGY_ACP_LOG"
    assert rows["AGYBRIDGE_MODE"] == {
        "name": "AGYBRIDGE_MODE", "value": "autonomous",
        "source": "AGYBRIDGE_SAFETY", "reloadable": False,
    }  # fmt: skip
    assert rows["AGYBRIDGE_TRACE"]["value"] == "1"
    assert rows["AGYBRIDGE_SIGINT_GRACE_S"] == {
        "name": "AGYBRIDGE_SIGINT_GRACE_S", "value": "2", "source": "default", "reloadable": False,
    }  # fmt: skip

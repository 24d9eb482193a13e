"""agy-acp-map compatibility: its session/new launch shapes, its AGY_ACP_*
variables and its extra set_config_option ids (pure parts; the wire is in
test_compat_integration.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agybridge import causes
from agybridge.agent.compat import (
    bridge_capabilities,
    conversation_id,
    launch_meta,
    launch_sources,
)
from agybridge.agent.params import settings_from
from agybridge.config import ConfigError, Settings
from agybridge.jsonrpc import RpcError
from agybridge.session.config import (
    LAUNCH_ONLY_OPTIONS,
    Catalog,
    LaunchSettings,
    apply_option,
    settings_from_meta,
)


def settings_for(params: dict[str, Any]) -> LaunchSettings:
    return settings_from_meta(LaunchSettings(), launch_meta({"cwd": "/w", **params}))


@pytest.mark.parametrize(
    "params",
    [
        {"model": "gemini-3-flash"},
        {"_meta": {"model": "gemini-3-flash"}},
        {"config": {"model": "gemini-3-flash"}},
        {"configOptions": [{"id": "model", "value": "gemini-3-flash"}]},
        {"configOptions": [{"configId": "model", "value": "gemini-3-flash"}]},
    ],
    ids=["top-level", "_meta", "config", "configOptions-id", "configOptions-configId"],
)
def test_each_launch_shape_sets_the_model(params: dict[str, Any]) -> None:
    """Every shape agy-acp-map accepts reaches the same setting."""
    assert settings_for(params).model == "gemini-3-flash"


def test_the_most_specific_shape_wins() -> None:
    """Top level, then _meta, then config, then configOptions."""
    params = {
        "configOptions": [{"id": "model", "value": "d"}, {"id": "effort", "value": "low"}],
        "config": {"model": "c", "printTimeout": "30m"},
        "_meta": {"model": "b", "sandbox": True},
        "model": "a",
    }
    settings = settings_for(params)
    assert (settings.model, settings.effort, settings.print_timeout, settings.sandbox) == (
        "a",
        "low",
        "30m",
        True,
    )


@pytest.mark.parametrize(
    ("params", "mode"),
    [
        ({"skipPermissions": True}, "autonomous"),
        ({"skipPermissions": True, "safety": "safe"}, "safe"),
        ({"skipPermissions": False}, "ask"),
        ({"safety": "unsandboxed"}, "autonomous-unsandboxed"),
        ({"disableSlashCommands": False, "mode": "plan"}, "plan"),
    ],
)
def test_skip_permissions_and_safety(params: dict[str, Any], mode: str) -> None:
    """skipPermissions means autonomous unless a safety tier is given."""
    assert settings_for(params).mode == mode


def test_json_schema_object_and_slash_commands() -> None:
    settings = settings_for({"jsonSchema": {"type": "object"}, "disableSlashCommands": False})
    assert settings.json_schema == '{"type": "object"}'
    assert settings.slash_commands is True


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"config": "model=x"}, "$.config"),
        ({"configOptions": {"model": "x"}}, "$.configOptions"),
        ({"configOptions": [{"value": "x"}]}, "$.configOptions[0]"),
        ({"configOptions": ["model"]}, "$.configOptions[0]"),
        ({"skipPermissions": "yes"}, "$.skipPermissions"),
    ],
)
def test_malformed_shapes_are_invalid_params(params: dict[str, Any], path: str) -> None:
    with pytest.raises(RpcError) as caught:
        launch_meta(params)
    assert caught.value.code == -32602 and caught.value.data == {"path": path}


def test_conversation_id_shapes() -> None:
    assert conversation_id({"conversationId": " c-1 "}) == "c-1"
    assert conversation_id({"_meta": {"conversationId": "c-2"}}) == "c-2"
    assert conversation_id({"cwd": "/w"}) is None
    for bad in ("", "--help", 3):
        with pytest.raises(RpcError):
            conversation_id({"conversationId": bad})


@pytest.mark.parametrize("bad", [" --help", "\t-x", "  -", " \n--model=x "])
def test_conversation_id_is_never_flag_like_after_trimming(bad: str) -> None:
    """The id goes to agy's argv as its own element after ``--conversation``:
    one that starts with '-' once trimmed would be read as a flag."""
    with pytest.raises(RpcError) as caught:
        conversation_id({"_meta": {"conversationId": bad}})
    assert caught.value.code == -32602
    assert caught.value.data == {"path": "$._meta.conversationId"}


@pytest.mark.parametrize(
    ("config_id", "value", "expected"),
    [
        ("sandbox", "true", {"sandbox": True}),
        ("printTimeout", "2h", {"print_timeout": "2h"}),
        ("jsonSchema", '{"type":"object"}', {"json_schema": '{"type":"object"}'}),
        ("disableSlashCommands", "false", {"slash_commands": True}),
        ("safety", "autonomous", {"mode": "autonomous"}),
    ],
)
def test_set_config_option_takes_agy_acp_map_ids(
    config_id: str, value: str, expected: dict[str, Any]
) -> None:
    settings = apply_option(LaunchSettings(), config_id, value, Catalog())
    assert {k: getattr(settings, k) for k in expected} == expected
    assert config_id in LAUNCH_ONLY_OPTIONS


def test_bad_extra_option_value_names_the_setting() -> None:
    with pytest.raises(ValueError, match="print timeout"):
        apply_option(LaunchSettings(), "printTimeout", "soon", Catalog())


def test_bridge_capabilities_name_models_and_agents() -> None:
    caps = bridge_capabilities([], ["helper"])
    assert caps["availableAgents"] == ["helper"] and caps["availableModels"] == []
    assert caps["resume"] is True and caps["historyReplay"] is True


# --- AGY_ACP_* variables: every one agy-acp-map documents -----------------------


def _settings(tmp_path: Path, **env: str) -> Settings:
    return Settings.from_env({"HOME": str(tmp_path), **env})


def _warned(settings: Settings, name: str) -> bool:
    return any(name in warning for warning in settings.warnings)


@pytest.mark.parametrize(
    ("name", "value", "field", "expected"),
    [
        ("AGY_ACP_MODEL", "gemini-3-flash", "model", "gemini-3-flash"),
        ("AGY_ACP_EFFORT", "high", "effort", "high"),
        ("AGY_ACP_MODE", "plan", "mode", "plan"),
        ("AGY_ACP_AGENT", "helper", "agent", "helper"),
        ("AGY_ACP_SANDBOX", "1", "sandbox", True),
        ("AGY_ACP_JSON_SCHEMA", "/tmp/schema.json", "json_schema", "/tmp/schema.json"),
        ("AGY_ACP_PRINT_TIMEOUT", "30m", "print_timeout", "30m"),
        ("AGY_ACP_SAFETY", "autonomous_unsandboxed", "mode", "autonomous-unsandboxed"),
        ("AGY_ACP_DISABLE_SLASH_COMMANDS", "0", "slash_commands", True),
        ("AGY_ACP_SKIP_PERMISSIONS", "1", "mode", "autonomous"),
    ],
)
def test_launch_variables_are_honoured_with_a_warning(
    tmp_path: Path, name: str, value: str, field: str, expected: Any
) -> None:
    settings = _settings(tmp_path, **{name: value})
    assert getattr(settings.launch, field) == expected
    assert _warned(settings, name)


@pytest.mark.parametrize(
    ("name", "value", "field", "expected"),
    [
        ("AGY_ACP_KEEP_STAGING", "1", "keep_staging", True),
        ("AGY_ACP_CONTEXT_SIZE", "1000000", "context_window", 1_000_000),
        ("AGY_ACP_LOG", "/tmp/agy-acp.log", "log_file", Path("/tmp/agy-acp.log")),
        ("AGY_ACP_DELETE_ON_CLOSE", "1", "delete_on_close", True),
    ],
)
def test_bridge_variables_are_honoured_with_a_warning(
    tmp_path: Path, name: str, value: str, field: str, expected: Any
) -> None:
    settings = _settings(tmp_path, **{name: value})
    assert getattr(settings, field) == expected
    assert _warned(settings, name)


def test_our_variable_wins_over_theirs(tmp_path: Path) -> None:
    settings = _settings(tmp_path, AGY_ACP_CONTEXT_SIZE="5", AGYBRIDGE_CONTEXT_WINDOW="7")
    assert settings.context_window == 7 and not _warned(settings, "AGY_ACP_CONTEXT_SIZE")


@pytest.mark.parametrize(
    ("name", "advice"),
    [("AGY_ACP_WARMUP", "always starts")],
)
def test_unsupported_variables_warn_what_to_use(tmp_path: Path, name: str, advice: str) -> None:
    settings = _settings(tmp_path, **{name: "1"})
    assert any(name in w and advice in w for w in settings.warnings)


def test_skip_permissions_yields_to_an_explicit_safety(tmp_path: Path) -> None:
    settings = _settings(tmp_path, AGY_ACP_SKIP_PERMISSIONS="1", AGY_ACP_SAFETY="safe")
    assert settings.launch.mode == "safe"
    assert any("AGY_ACP_SKIP_PERMISSIONS is ignored" in w for w in settings.warnings)
    off = _settings(tmp_path, AGY_ACP_SKIP_PERMISSIONS="0")
    assert off.launch.mode == "ask" and _warned(off, "AGY_ACP_SKIP_PERMISSIONS=0")
    with pytest.raises(ConfigError, match="AGY_ACP_SKIP_PERMISSIONS"):
        _settings(tmp_path, AGY_ACP_SKIP_PERMISSIONS="maybe")


def test_store_variables_are_honoured(tmp_path: Path) -> None:
    """AGY_ACP_STORE / AGY_ACP_SESSION_STORE / AGY_ACP_HISTORY_DIR name the import's files."""
    settings = _settings(
        tmp_path,
        AGY_ACP_STORE=str(tmp_path / "a.json"),
        AGY_ACP_SESSION_STORE=str(tmp_path / "b.json"),
        AGY_ACP_HISTORY_DIR=str(tmp_path / "h"),
    )
    assert settings.legacy is not None
    assert str(settings.legacy.sessions_file).endswith("b.json")
    assert str(settings.legacy.history_dir).endswith("h")


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"_meta": {"effort": "huge"}}, "$._meta.effort"),
        ({"effort": "huge"}, "$.effort"),
        ({"model": "-x", "_meta": {"model": "ok"}}, "$.model"),
        ({"config": {"printTimeout": "-1"}}, "$.config.printTimeout"),
        ({"configOptions": [{"id": "model", "value": "-x"}]}, "$.configOptions[0].value"),
        (
            {"configOptions": [{"configId": "sandbox", "value": "maybe"}]},
            "$.configOptions[0].value",
        ),
    ],
)
def test_a_bad_launch_value_is_named_where_it_was_sent(params: dict[str, Any], path: str) -> None:
    """-32602 names the field the client sent (a top-level ``effort`` is not ``_meta.effort``)."""
    with pytest.raises(RpcError) as caught:
        settings_from(LaunchSettings(), *launch_sources(params))
    assert caught.value.code == -32602
    assert caught.value.data["path"] == path
    cause = "invalid_model" if path.endswith(".model") else "invalid_setting"
    assert causes.cause_of(caught.value.data) == cause
    assert caught.value.message.startswith(f"{path[2:]}: ")

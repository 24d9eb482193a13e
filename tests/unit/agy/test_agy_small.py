"""Small pure pieces around the agy child: stderr classes, argv and settings."""

from __future__ import annotations

from pathlib import Path

import attrs
import platformdirs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.agy import LaunchSpec, StderrKind, build_argv, classify_stderr
from agybridge.config import APP_NAME, ConfigError, Settings
from agybridge.lines import DEFAULT_MAX_LINE_BYTES

# --- stderr ---------------------------------------------------------------------------

K = StderrKind

#: Every line of shared/agy/samples/stderr-lines-observed.txt and the class it must get.
OBSERVED: dict[str, StderrKind] = {
    "error: Individual quota reached. Please upgrade your subscription to increase your "
    "limits. Resets in 167h51m3s.": K.ERROR,
    'AGY_ERROR: {"short_error":"RESOURCE_EXHAUSTED (code 429): Individual quota reached. '
    'Please upgrade your subscription to increase your limits. Resets in 167h51m3s.",'
    '"status":"RESOURCE_EXHAUSTED","error_code":429,"code_kind":"http","retryable":true,'
    '"error_id":"6baa4ce9-c373-4086-bb0d-fbb8421bacf3-1"}': K.AGY_ERROR,
    'jetski: no output produced — a tool required the "command" permission that headless mode '
    "cannot prompt for, so it was auto-denied. Add an allow-rule under permissions.allow in "
    "settings.json (e.g. command(<target>)). Alternatively, re-run with "
    "--dangerously-skip-permissions to auto-approve all tools.": K.SOFT_DENY,
    'error: stream input message is missing the "event" field': K.ERROR,
    'warning: ignoring unsupported stream input message event "ping"': K.WARNING,
    'error: stream input "user" message is missing the "message" field': K.ERROR,
    'error: stream input "user" message has no content': K.ERROR,
    'error: stream input message event "control_request" is not supported yet': K.ERROR,
    "error: interrupted": K.INTERRUPTED,
    "context canceled": K.INTERRUPTED,
    "flag needs an argument: -print": K.OTHER,
    'Error: --print took "--input-format" as its prompt, so the intended prompt was': K.ERROR,
    "left as an argument and ignored.": K.OTHER,
    "root agent idle; waiting up to 5s for 1 background task(s)": K.OTHER,
    "terminating 1 background task(s) on exit": K.OTHER,
    "error getting token source: You are not logged into Antigravity.": K.AUTH,
    "warning: --mode plan has no effect while slash command expansion is disabled.": K.WARNING,
}

#: Lines quoted in contract.md §4 and §8 that the capture file does not hold.
CONTRACT_LINES: dict[str, StderrKind] = {
    "Please sign in to view available models…": K.AUTH,
    "Error: authentication required": K.AUTH,
    "Error: authentication timed out.": K.AUTH,
    "Print mode: auth timed out": K.AUTH,
    # `agy -p /hooks` signed out (GOBBY capture via fake_agy _hooks_command).
    "error: authentication failed or timed out": K.AUTH,
    "Authentication expired. Please log back in.": K.AUTH,
    # Only the line after it (authentication timed out) says it failed.
    "Waiting for authentication (timeout 30s)...": K.OTHER,
    "[agy] print timeout after 5m0s; partial output": K.PRINT_TIMEOUT,
    'warning: conversation "8dd06a16" not found': K.WARNING,
    "panic: runtime error: index out of range": K.ERROR,
    "AGY_ERROR: not json": K.ERROR,
    "AGY_ERROR: [1, 2]": K.ERROR,
    "  error: interrupted  ": K.INTERRUPTED,
    "": K.OTHER,
}


def test_observed_table_covers_the_capture(samples_dir: Path) -> None:
    """The table holds exactly the lines of the stderr capture, so none goes unchecked."""
    text = (samples_dir / "stderr-lines-observed.txt").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert sorted(lines) == sorted(OBSERVED)


@pytest.mark.parametrize(("line", "kind"), [*OBSERVED.items(), *CONTRACT_LINES.items()])
def test_classify_stderr(line: str, kind: StderrKind) -> None:
    """Each known stderr line gets its class; the text is kept, stripped."""
    classified = classify_stderr(line)
    assert classified.kind is kind
    assert classified.text == line.strip()
    assert (classified.details is not None) == (kind is K.AGY_ERROR)


def test_agy_error_details_are_parsed() -> None:
    """The JSON after ``AGY_ERROR:`` is kept as details."""
    line = next(line for line in OBSERVED if line.startswith("AGY_ERROR:"))
    details = classify_stderr(line).details
    assert details is not None
    assert details["status"] == "RESOURCE_EXHAUSTED"
    assert details["error_code"] == 429
    assert details["retryable"] is True


@given(st.text(max_size=200))
def test_classify_never_raises(line: str) -> None:
    """Any text gets some class and keeps its stripped text."""
    classified = classify_stderr(line)
    assert classified.text == line.strip()


# --- argv -----------------------------------------------------------------------------

FIXED = [
    "--input-format",
    "stream-json",
    "--output-format",
    "stream-json",
    "--print-timeout",
    "0",
]

# (description, spec, argv after the binary)
ARGV_CASES = [
    ("cwd only", LaunchSpec(cwd="/w"), [*FIXED, "--add-dir", "/w"]),
    (
        "additional directories after the cwd, in order",
        LaunchSpec(cwd="/w", additional_dirs=("/a", "/b c")),
        [*FIXED, "--add-dir", "/w", "--add-dir", "/a", "--add-dir", "/b c"],
    ),
    (
        "each root once: the cwd moved into an additional directory, a directory listed twice",
        LaunchSpec(cwd="/a", additional_dirs=("/w", "/a", "/w")),
        [*FIXED, "--add-dir", "/a", "--add-dir", "/w"],
    ),
    (
        "conversation as two tokens",
        LaunchSpec(cwd="/w", conversation_id="8dd06a16-a76f-46cd-80b0-a416eab5898f"),
        [*FIXED, "--add-dir", "/w", "--conversation", "8dd06a16-a76f-46cd-80b0-a416eab5898f"],
    ),
    (
        "user values with '=' so they are never read as flags",
        LaunchSpec(
            cwd="/w",
            model="Gemini 3.7 Flash (High)",
            effort="-high",
            mode="plan",
            agent="--reviewer",
        ),
        [
            *FIXED,
            "--add-dir",
            "/w",
            "--model=Gemini 3.7 Flash (High)",
            "--effort=-high",
            "--mode=plan",
            "--agent=--reviewer",
        ],
    ),
    (
        "everything, extra arguments last",
        LaunchSpec(
            cwd="/w",
            additional_dirs=("/a",),
            conversation_id="c1",
            model="m",
            extra_args=("--sandbox",),
        ),
        [
            *FIXED,
            "--add-dir",
            "/w",
            "--add-dir",
            "/a",
            "--conversation",
            "c1",
            "--model=m",
            "--sandbox",
        ],
    ),
    (
        "empty values are left out",
        LaunchSpec(cwd="/w", conversation_id="", model="", effort=None),
        [*FIXED, "--add-dir", "/w"],
    ),
]


@pytest.mark.parametrize(
    ("spec", "expected"), [c[1:] for c in ARGV_CASES], ids=[c[0] for c in ARGV_CASES]
)
def test_build_argv(spec: LaunchSpec, expected: list[str]) -> None:
    """Fixed stream flags first, then workspace roots, the conversation and user values."""
    assert build_argv("/opt/agy/bin/agy", spec) == ["/opt/agy/bin/agy", *expected]


_value = st.none() | st.text(min_size=1, max_size=20)


@given(model=_value, effort=_value, mode=_value, agent=_value)
def test_user_values_always_ride_with_their_flag(
    model: str | None, effort: str | None, mode: str | None, agent: str | None
) -> None:
    """A user value never becomes a token of its own, and no -p is ever passed."""
    spec = LaunchSpec(cwd="/w", model=model, effort=effort, mode=mode, agent=agent)
    argv = build_argv("agy", spec)
    assert argv[: len(FIXED) + 3] == ["agy", *FIXED, "--add-dir", "/w"]
    tail = argv[len(FIXED) + 3 :]
    expected = [
        f"{flag}={value}"
        for flag, value in (
            ("--model", model),
            ("--effort", effort),
            ("--mode", mode),
            ("--agent", agent),
        )
        if value
    ]
    assert tail == expected
    assert "-p" not in argv and "--print" not in argv


# --- settings -------------------------------------------------------------------------


def test_settings_defaults() -> None:
    """An empty environment gives the documented defaults."""
    settings = attrs.evolve(Settings.from_env({}), db_path=None, legacy=None, staging_dir="")
    assert settings == Settings(
        agy_bin="agy",
        sigint_grace_s=2.0,
        sigterm_grace_s=1.0,
        max_line_bytes=DEFAULT_MAX_LINE_BYTES,
        shutdown_grace_s=3.0,
        log_file=Path(platformdirs.user_log_dir(APP_NAME)) / f"{APP_NAME}.log",
        log_level="INFO",
    )


def test_settings_from_values() -> None:
    """Valid values are read and converted."""
    settings = Settings.from_env(
        {
            "AGY_BIN": "/opt/agy",
            "AGYBRIDGE_SIGINT_GRACE_S": "0.5",
            "AGYBRIDGE_SIGTERM_GRACE_S": "0",
            "AGYBRIDGE_MAX_LINE_BYTES": "1048576",
            "AGYBRIDGE_SHUTDOWN_GRACE_S": "3600",
            "AGYBRIDGE_LOG_FILE": "/var/log/bridge.log",
            "AGYBRIDGE_LOG_LEVEL": "debug",
        }
    )
    assert attrs.evolve(settings, db_path=None, legacy=None, staging_dir="") == Settings(
        agy_bin="/opt/agy",
        agy_bin_set=True,
        sigint_grace_s=0.5,
        sigterm_grace_s=0.0,
        max_line_bytes=1048576,
        shutdown_grace_s=3600.0,
        log_file=Path("/var/log/bridge.log"),
        log_level="DEBUG",
    )


@pytest.mark.parametrize(
    ("value", "log_file"),
    [
        ("", None),
        ("-", None),
        ("~/bridge.log", Path("/home/u/bridge.log")),
        ("/tmp/b.log", Path("/tmp/b.log")),
    ],
)
def test_log_file(value: str, log_file: Path | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty or ``-`` AGYBRIDGE_LOG_FILE disables the log file; ``~`` is expanded."""
    monkeypatch.setenv("HOME", "/home/u")
    assert Settings.from_env({"AGYBRIDGE_LOG_FILE": value}).log_file == log_file


def test_empty_values_take_defaults() -> None:
    """Empty numeric variables and an empty AGY_BIN mean "use the default"."""
    settings = Settings.from_env(
        {
            "AGY_BIN": "",
            "AGYBRIDGE_SIGINT_GRACE_S": "",
            "AGYBRIDGE_MAX_LINE_BYTES": "",
            "AGYBRIDGE_LOG_FILE": "",
        }
    )
    assert attrs.evolve(settings, db_path=None, legacy=None, staging_dir="") == Settings(
        log_file=None
    )


def test_database_and_legacy_paths() -> None:
    """AGYBRIDGE_DB picks the session database; agy-acp-map's paths are found."""
    settings = Settings.from_env({"AGYBRIDGE_DB": "/data/s.db", "AGY_ACP_STORE": "/old/s.json"})
    assert settings.db_path == Path("/data/s.db")
    assert settings.legacy is not None
    assert settings.legacy.sessions_file == Path("/old/s.json")


BAD_VALUES = [
    ("AGYBRIDGE_SIGINT_GRACE_S", "soon"),
    ("AGYBRIDGE_SIGINT_GRACE_S", "-1"),
    ("AGYBRIDGE_SIGTERM_GRACE_S", "3601"),
    ("AGYBRIDGE_SIGTERM_GRACE_S", "nan"),
    ("AGYBRIDGE_SHUTDOWN_GRACE_S", "inf"),
    ("AGYBRIDGE_SHUTDOWN_GRACE_S", "2s"),
    ("AGYBRIDGE_MAX_LINE_BYTES", "0"),
    ("AGYBRIDGE_MAX_LINE_BYTES", "-5"),
    ("AGYBRIDGE_MAX_LINE_BYTES", "1.5"),
    ("AGYBRIDGE_MAX_LINE_BYTES", "64MiB"),
    ("AGYBRIDGE_LOG_LEVEL", "LOUD"),
    ("AGYBRIDGE_LOG_LEVEL", "CRITICAL"),
]


@pytest.mark.parametrize(("name", "value"), BAD_VALUES)
def test_bad_values_name_variable_and_value(name: str, value: str) -> None:
    """A bad value is a ConfigError naming the variable and showing the value."""
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({name: value})
    message = str(caught.value)
    assert name in message
    assert repr(value) in message


def test_bad_log_level_shows_the_value_as_set() -> None:
    """The error shows the log level exactly as the user wrote it."""
    with pytest.raises(ConfigError, match="'verbose'"):
        Settings.from_env({"AGYBRIDGE_LOG_LEVEL": "verbose"})

"""Tests of the fake agy (fake_agy) against contract.md and the captures.

Most tests run the fake as a real subprocess. None sleeps to synchronise: interactive
tests read stdout until the event they need, every wait has a deadline, and every fake
(and every ``sleep`` child it spawned, found by an environment marker) is killed at teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fake_agy._fake_cli import (
    MODELS,
    TOOLS,
    VERSION,
    FlagError,
    parse_argv,
    parse_go_duration,
    usage_text,
)
from fake_agy._fake_protocol import (
    Fatal,
    Ignored,
    UserPrompt,
    parse_capture,
    parse_input_line,
)
from fake_agy._fake_scenarios import example_for_schema, split_fragments

from ..conftest import DATA_DIR, REPO, SAMPLES

DATA = DATA_DIR / "fake_agy"
COMMAND = [sys.executable, "-m", "fake_agy"]
STREAM = ["--input-format", "stream-json", "--output-format", "stream-json"]
DEADLINE_S = 15.0
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")

Event = dict[str, Any]


def user(content: Any, **extra: Any) -> str:
    """One stream-json stdin line."""
    return json.dumps({"event": "user", "message": {"content": content, **extra}})


def parse_lines(text: str) -> list[Event]:
    """The JSON objects of an NDJSON text, skipping non-JSON lines (contract.md §2.2)."""
    events = []
    for line in text.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str
    events: list[Event] = field(default_factory=list)

    def results(self) -> list[Event]:
        return [e["result"] for e in self.events if e.get("event") == "result"]

    def steps(self) -> list[Event]:
        return [e["step_update"] for e in self.events if e.get("event") == "step_update"]


class Live:
    """A running fake with line-at-a-time stdout reads under a deadline."""

    def __init__(self, args: Sequence[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [*COMMAND, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,  # like the bridge; keeps test-runner groups out of reach
        )
        self._buffer = b""
        self.seen: list[Event] = []

    def send(self, *lines: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("".join(f"{line}\n" for line in lines).encode())
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        if not self.proc.stdin.closed:
            self.proc.stdin.close()

    def _line(self, deadline: float) -> str | None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no stdout line from fake agy within {DEADLINE_S}s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    rest, self._buffer = self._buffer, b""
                    return rest.decode() if rest else None
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def pending(self) -> bytes:
        """Stdout bytes read from the pipe but not yet returned as lines."""
        return self._buffer

    def event(self) -> Event:
        """The next JSON event on stdout."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            line = self._line(deadline)
            if line is None:
                pytest.fail("fake agy closed stdout while an event was expected")
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self.seen.append(event)
            return event  # type: ignore[no-any-return]

    def until(self, predicate: Callable[[Event], bool]) -> list[Event]:
        """Events up to and including the first one matching ``predicate``."""
        events = []
        while True:
            events.append(self.event())
            if predicate(events[-1]):
                return events

    def finish(self) -> Done:
        """Close stdin, read stdout to EOF, reap the process."""
        self.close_stdin()
        deadline = time.monotonic() + DEADLINE_S
        lines = []
        while (line := self._line(deadline)) is not None:
            lines.append(line)
        code = self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        assert self.proc.stderr is not None
        stderr = self.proc.stderr.read().decode()
        stdout = "".join(f"{line}\n" for line in lines)
        return Done(code, stdout, stderr, parse_lines(stdout))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=DEADLINE_S)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def marked_pids(marker: str) -> list[int]:
    """Live processes whose environment carries ``FAKE_AGY_TEST_MARKER=<marker>``."""
    needle = f"FAKE_AGY_TEST_MARKER={marker}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            pids.append(int(entry))
    return pids


class Harness:
    """Starts fakes with an isolated environment and cleans up after them."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.cwd = tmp_path / "ws"
        self.cwd.mkdir()
        self.state_dir = tmp_path / "state"
        self.launch_log = tmp_path / "launch.log"
        self.marker = uuid.uuid4().hex
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("FAKE_AGY_", "AGY_"))
        }
        # A private HOME: agy (and so the fake) also runs ~/.gemini/config/hooks.json.
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.env.update(
            HOME=str(self.home),
            PYTHONPATH=str(REPO),
            FAKE_AGY_STATE_DIR=str(self.state_dir),
            FAKE_AGY_LAUNCH_LOG=str(self.launch_log),
            FAKE_AGY_FRAGMENT_DELAY="0",
            FAKE_AGY_SLOW_INTERVAL="0.05",
            FAKE_AGY_SPAWN_CHILDREN="0",
            FAKE_AGY_TEST_MARKER=self.marker,
        )
        self.lives: list[Live] = []

    def environment(self, **overrides: str) -> dict[str, str]:
        return {**self.env, **overrides}

    def start(self, args: Sequence[str], **env: str) -> Live:
        live = Live(args, self.environment(**env), self.cwd)
        self.lives.append(live)
        return live

    def run(
        self,
        args: Sequence[str],
        lines: Sequence[str] = (),
        *,
        command: Sequence[str] = COMMAND,
        cwd: Path | None = None,
        **env: str,
    ) -> Done:
        """Run to completion with ``lines`` on stdin, then EOF."""
        proc = subprocess.run(
            [*command, *args],
            input="".join(f"{line}\n" for line in lines).encode(),
            capture_output=True,
            env=self.environment(**env),
            cwd=cwd or self.cwd,
            timeout=DEADLINE_S,
            check=False,
        )
        stdout = proc.stdout.decode()
        return Done(proc.returncode, stdout, proc.stderr.decode(), parse_lines(stdout))

    def log_entries(self) -> list[Event]:
        if not self.launch_log.exists():
            return []
        return [json.loads(line) for line in self.launch_log.read_text().splitlines()]

    def wait_for_log(self, predicate: Callable[[Event], bool]) -> Event:
        """Poll the launch log (the fake's test channel) until an entry matches."""
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            for entry in self.log_entries():
                if predicate(entry):
                    return entry
            time.sleep(0.01)
        pytest.fail("launch log entry never appeared")

    def cleanup(self) -> None:
        for live in self.lives:
            live.kill()
        for pid in marked_pids(self.marker):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + DEADLINE_S
        while marked_pids(self.marker) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not marked_pids(self.marker), "processes left behind"


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    try:
        yield harness
    finally:
        harness.cleanup()


def init_of(done: Done) -> Event:
    assert done.events and done.events[0]["event"] == "init", done.stdout
    return done.events[0]


# --- argv (contract.md §1) -------------------------------------------------------------


def test_version_prints_a_version_line(fake: Harness) -> None:
    """--version prints the 1.2.14-style version and exits 0."""
    done = fake.run(["--version"])
    assert (done.code, done.stdout) == (0, f"{VERSION}\n")


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--output-format", "stream-json", "--print"], "flag needs an argument: -print", 2),
        (["--output-format", "stream-json", "-p"], "flag needs an argument: -p", 2),
        (["--bogus"], "flag provided but not defined: -bogus", 2),
        (["-x=1"], "flag provided but not defined: -x", 2),
        (["--sandbox=maybe"], 'invalid boolean value "maybe" for -sandbox: parse error', 2),
        (
            ["--print-timeout", "soon"],
            'invalid value "soon" for flag -print-timeout: parse error',
            2,
        ),
        (["---print"], "bad flag syntax: ---print", 2),
    ],
)
def test_flag_errors_print_go_message_and_usage(
    fake: Harness, args: list[str], message: str, code: int
) -> None:
    """Go flag errors print the error line, then the usage, on stderr and exit 2."""
    done = fake.run(args)
    assert done.code == code
    assert done.stdout == ""
    assert done.stderr == f"{message}\n{usage_text()}"


def test_help_flag_prints_usage_and_exits_zero(fake: Harness) -> None:
    """-h is Go's ErrHelp: usage only, exit 0."""
    done = fake.run(["-h"])
    assert (done.code, done.stdout, done.stderr) == (0, "", usage_text())


def test_print_swallowing_a_flag_is_an_error(fake: Harness) -> None:
    """`--print --input-format ...` gives the 1.2.7 "took ... as its prompt" error, exit 1."""
    done = fake.run(["--print", "--input-format", "stream-json", "--output-format", "stream-json"])
    assert done.code == 1
    assert done.stdout == ""
    assert done.stderr == (
        'Error: --print took "--input-format" as its prompt, so the intended prompt was\n'
        "left as an argument and ignored.\n"
    )


def test_stream_input_requires_stream_output(fake: Harness) -> None:
    """--input-format stream-json without --output-format stream-json fails at startup."""
    done = fake.run(["--input-format", "stream-json", "--output-format", "json"])
    assert done.code == 1
    assert "requires --output-format stream-json" in done.stderr
    assert done.stdout == ""


def test_no_prompt_and_no_stream_input_is_refused(fake: Harness) -> None:
    """Without a prompt or stream input agy would need a TTY; the fake refuses."""
    done = fake.run([])
    assert done.code == 1
    assert done.stderr.startswith("error: interactive mode needs a terminal")


@pytest.mark.parametrize(
    "print_args",
    [[], ["-p", ""], ["-p="], ["--print="], ["--print", ""], ["--prompt="], ["-p", "dropped"]],
    ids=["none", "p-empty", "p-eq", "print-eq", "print-empty", "prompt-eq", "p-nonempty"],
)
def test_stream_mode_accepts_every_print_form(fake: Harness, print_args: list[str]) -> None:
    """Stream mode runs with no -p or an empty one; a non-empty -p is dropped (§1.2)."""
    done = fake.run([*print_args, *STREAM], [user("hello")])
    assert done.code == 0, done.stderr
    [result] = done.results()
    assert result["response"] == "hello\n"


def test_parse_argv_follows_go_flag_rules() -> None:
    """-x, --x, -x=v, -x v are equivalent; bools never consume; -- and non-flags stop."""
    opts = parse_argv(
        [
            "--add-dir=/a",
            "-add-dir",
            "/b",
            "-model",
            "gemini-3.7-flash-low",
            "--sandbox",
            "-dangerously-skip-permissions=true",
            "--disable-slash-commands=false",
            "--print-timeout=1h30m",
            "-c",
            "models",
            "--extra",
        ]
    )
    assert opts.add_dirs == ["/a", "/b"]
    assert opts.model == "gemini-3.7-flash-low"
    assert opts.sandbox and opts.skip_permissions and opts.continue_last
    assert not opts.disable_slash_commands
    assert opts.print_timeout == "1h30m"
    assert opts.positional == ["models", "--extra"]
    assert parse_argv(["--", "--model", "x"]).positional == ["--model", "x"]
    assert parse_argv(["-p=", "-"]).print_prompt == ""
    with pytest.raises(FlagError) as caught:
        parse_argv(["-h"])
    assert caught.value.message is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("0s", 0.0),
        ("5m0s", 300.0),
        ("1h", 3600.0),
        ("24h0m0s", 86400.0),
        ("1.5s", 1.5),
        ("300ms", 0.3),
        ("1h30m", 5400.0),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    """--print-timeout takes Go durations."""
    assert parse_go_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "s", "1x", "1h-", "soon", "."])
def test_bad_go_durations(text: str) -> None:
    """Strings Go's time.ParseDuration rejects are rejected."""
    with pytest.raises(ValueError):
        parse_go_duration(text)


def test_usage_keeps_the_1_1_14_help_rows() -> None:
    """Rows of the captured 1.1.14 help that did not change later are reproduced verbatim."""
    sample = SAMPLES / "tiezbro-1.1.14-help-and-flag-error.stderr.txt"
    ours = usage_text().splitlines()
    changed = ("--effort", "--print-timeout")  # 1.3.1 effort levels; 1.2.6 default 0s
    for line in sample.read_text().splitlines()[1:]:
        if line.strip() and not line.lstrip().startswith(changed):
            assert line in ours


# --- init (contract.md §3.1) -----------------------------------------------------------


def test_init_comes_before_any_stdin(fake: Harness) -> None:
    """init is printed at startup without waiting for input; EOF then exits 0 (§2.4)."""
    live = fake.start(STREAM)
    event = live.event()
    assert event["event"] == "init"
    assert UUID_RE.fullmatch(event["conversation_id"])
    init = event["init"]
    assert list(init) == ["cwd", "tools", "permission_mode"]
    assert init["cwd"] == os.path.realpath(fake.cwd)
    assert init["permission_mode"] == "request-review"
    assert len(init["tools"]) == 56
    done = live.finish()
    assert (done.code, done.events) == (0, [])
    # The conversation exists even though no turn ran (§2.4).
    assert (fake.state_dir / f"{event['conversation_id']}.json").exists()


def test_init_tools_match_the_1_1_14_capture() -> None:
    """The tool list is the exact 56 names of the 1.1.14 captures."""
    capture = SAMPLES / "tiezbro-1.1.14-pong-default-model.ndjson"
    init = json.loads(capture.read_text().splitlines()[0])["init"]
    assert list(TOOLS) == init["tools"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--dangerously-skip-permissions"], {"permission_mode": "always-proceed"}),
        (["--mode", "plan"], {"permission_mode": "request-review"}),
        (["--model", "gemini-3.7-flash-low"], {"model": "Gemini 3.7 Flash (Low)"}),
        (["--model", "Gemini 3.7 Flash (Low)"], {"model": "Gemini 3.7 Flash (Low)"}),
        (["--agent", "reviewer"], {"agent": "reviewer"}),
    ],
)
def test_init_reflects_flags(fake: Harness, args: list[str], expected: dict[str, str]) -> None:
    """permission_mode, model (display name) and agent follow the flags (§3.1)."""
    init = init_of(fake.run([*STREAM, *args]))["init"]
    for key, value in expected.items():
        assert init[key] == value
    assert ("model" in init) == ("--model" in args)
    assert ("agent" in init) == ("--agent" in args)


def test_lazy_init_waits_for_the_first_line(fake: Harness) -> None:
    """FAKE_AGY_LAZY_INIT prints init on the first input (AT's claim), none on bare EOF."""
    assert fake.run(STREAM, FAKE_AGY_LAZY_INIT="1").stdout == ""
    done = fake.run(STREAM, [user("hi")], FAKE_AGY_LAZY_INIT="1")
    assert [e["event"] for e in done.events[:2]] == ["init", "step_update"]


def test_startup_delay_holds_init_back(fake: Harness) -> None:
    """FAKE_AGY_STARTUP_DELAY delays init by at least that long."""
    started = time.monotonic()
    done = fake.run(STREAM, FAKE_AGY_STARTUP_DELAY="0.3")
    assert time.monotonic() - started >= 0.3
    init_of(done)


def test_unknown_model_is_a_pre_turn_error(fake: Harness) -> None:
    """Unknown --model: no init, one ERROR result like the 1.1.14 capture, exit 1."""
    done = fake.run([*STREAM, "--model", "nope", "--effort", "high"], [user("hi")])
    assert done.code == 1
    [event] = done.events
    available = "".join(f"\n  {display}" for _, display in MODELS)
    text = (
        'invalid model selection (--model "nope" --effort "high"): model nope is not '
        f"recognized as a known model or custom model in settings\nAvailable models:{available}"
    )
    assert event == {
        "event": "result",
        "result": {
            "conversation_id": "",
            "status": "ERROR",
            "response": "",
            "error": text,
            "duration_seconds": 0,
            "num_turns": 0,
            "usage": dict.fromkeys(
                [
                    "input_tokens",
                    "output_tokens",
                    "thinking_tokens",
                    "cache_read_tokens",
                    "total_tokens",
                ],
                0,
            ),
        },
    }
    assert done.stderr == f"error: {text}\n"


def test_unknown_model_matches_the_capture_byte_for_byte(fake: Harness) -> None:
    """The invalid-model line equals samples/tiezbro-1.1.14-invalid-model-error.ndjson."""
    capture = SAMPLES / "tiezbro-1.1.14-invalid-model-error.ndjson"
    done = fake.run(["--model", "__s3_t08_nonexistent_model__", *STREAM])
    assert done.stdout == capture.read_text().strip() + "\n"


# --- turns (contract.md §2.3, §3.2, §3.5) ----------------------------------------------


def check_turn(steps: list[Event], result: Event) -> None:
    """One turn's invariants: user_input first, DONE after ACTIVE, response = deltas."""
    assert steps[0]["step_type"] == "user_input" and steps[0]["state"] == "DONE"
    deltas = "".join(s.get("text_delta", "") for s in steps)
    assert result["response"] == deltas
    responses = [s for s in steps if s["step_type"] == "agent_response"]
    assert responses[-1]["state"] == "DONE" and responses[-1]["text_delta"] == "\n"
    assert isinstance(responses[-1]["duration_seconds"], float)
    assert "error" not in result and result["status"] == "SUCCESS"


def split_turns(events: list[Event]) -> list[tuple[list[Event], Event]]:
    turns, steps = [], []
    for event in events:
        if event["event"] == "step_update":
            steps.append(event["step_update"])
        elif event["event"] == "result":
            turns.append((steps, event["result"]))
            steps = []
    return turns


def test_echo_two_turns_have_cumulative_counters(fake: Harness) -> None:
    """Two turns: per-turn invariants, monotonic step_index with gaps, cumulative result."""
    done = fake.run(STREAM, [user("Reply with exactly: banana"), user("second prompt")])
    assert done.code == 0, done.stderr
    cid = init_of(done)["conversation_id"]
    turns = split_turns(done.events)
    assert len(turns) == 2
    running: dict[str, int] = {}
    indexes: list[int] = []
    for number, (steps, result) in enumerate(turns, start=1):
        check_turn(steps, result)
        assert sum(1 for s in steps if s["state"] == "ACTIVE") >= 2
        for step in steps:
            assert step["conversation_id"] == cid
            if not indexes or step["step_index"] != indexes[-1]:
                indexes.append(step["step_index"])
            for key, value in step.get("usage", {}).items():
                running[key] = running.get(key, 0) + value
        assert result["num_turns"] == number
        assert result["conversation_id"] == cid
        assert result["usage"] == running
        usage = result["usage"]
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert usage["thinking_tokens"] <= usage["output_tokens"]
        assert any(s["step_type"] == "checkpoint" and "usage" in s for s in steps)
    assert indexes == sorted(indexes) and len(set(indexes)) == len(indexes)
    assert indexes[0] == 0 and indexes[-1] > len(indexes) - 1  # gaps exist
    assert turns[0][0][0]["step_index"] == 0
    assert turns[1][1]["duration_seconds"] >= turns[0][1]["duration_seconds"]
    assert turns[0][1]["response"] == "Reply with exactly: banana\n"


def test_lines_sent_mid_turn_are_queued(fake: Harness) -> None:
    """A line written during a turn is read only after that turn's result (§2.3)."""
    live = fake.start(STREAM, FAKE_AGY_FRAGMENT_DELAY="0.02")
    live.event()
    live.send(user("first"))
    live.until(lambda e: e.get("step_update", {}).get("state") == "ACTIVE")
    live.send(user("second"))
    done = live.finish()
    events = live.seen + done.events
    kinds = [
        e["event"] if e["event"] != "step_update" else e["step_update"]["step_type"]
        for e in events[1:]
    ]
    first_result = kinds.index("result")
    assert kinds.count("user_input") == 2
    assert kinds.index("user_input", 1) > first_result
    stdin = [entry["stdin"] for entry in fake.log_entries() if "stdin" in entry]
    assert stdin == [user("first"), user("second")]


def test_content_blocks_and_extra_keys_are_accepted(fake: Harness) -> None:
    """content may be an array of text blocks; extra keys like role are ignored (§2.1)."""
    blocks = [{"type": "text", "text": "Reply with"}, {"type": "text", "text": "PONG"}]
    done = fake.run(STREAM, [user(blocks, role="user")])
    assert done.results()[0]["response"] == "Reply with\nPONG\n"


def test_large_prompt_line_is_served(fake: Harness) -> None:
    """A multi-MiB stdin line is read whole and echoed in a bounded number of fragments."""
    text = "x" * (8 << 20)
    done = fake.run(STREAM, [user(text)])
    assert done.code == 0
    [(steps, result)] = split_turns(done.events)
    assert result["response"] == text + "\n"
    assert len(steps) < 20


def test_eof_right_after_a_prompt_still_finishes_the_turn(fake: Harness) -> None:
    """Writing a final prompt and closing stdin still yields its result, exit 0 (§2.4)."""
    done = fake.run(STREAM, [user("last words")], FAKE_AGY_FRAGMENT_DELAY="0.05")
    assert done.code == 0
    assert [r["response"] for r in done.results()] == ["last words\n"]


def test_unterminated_last_line_is_still_a_turn(fake: Harness) -> None:
    """A final line without a newline before EOF is served."""
    proc = subprocess.run(
        [*COMMAND, *STREAM],
        input=user("no newline").encode(),
        capture_output=True,
        env=fake.environment(),
        cwd=fake.cwd,
        timeout=DEADLINE_S,
        check=False,
    )
    assert proc.returncode == 0
    assert parse_lines(proc.stdout.decode())[-1]["result"]["response"] == "no newline\n"


def test_one_shot_print_mode(fake: Harness) -> None:
    """`-p <prompt> --output-format stream-json` runs one turn and exits 0; stdin unread."""
    done = fake.run(["-p", "one shot", "--output-format", "stream-json"], [user("ignored")])
    assert done.code == 0
    init_of(done)
    [(steps, result)] = split_turns(done.events)
    check_turn(steps, result)
    assert result["response"] == "one shot\n"


def test_one_shot_json_and_text_formats(fake: Harness, tmp_path: Path) -> None:
    """--output-format json prints one envelope; text prints the reply; @file prompts."""
    done = fake.run(["-p", "hi", "--output-format", "json"])
    [envelope] = done.events
    assert "event" not in envelope and envelope["response"] == "hi\n"
    assert fake.run(["--print", "hi there"]).stdout == "hi there\n"
    prompt_file = tmp_path / "prompt.md"
    prompt_file.write_text("from a file")
    assert fake.run(["--print", f"@{prompt_file}"]).stdout == "from a file\n"


# --- stdin validation (contract.md §2.2) -----------------------------------------------

VALIDATION_CASES = [
    (
        '{"type":"user","message":{"content":"x"}}',
        'error: stream input message is missing the "event" field',
        1,
    ),
    ('{"event":"user"}', 'error: stream input "user" message is missing the "message" field', 1),
    (
        '{"event":"user","message":{"unexpected":1}}',
        'error: stream input "user" message has no content',
        1,
    ),
    (
        '{"event":"user","message":{"content":""}}',
        'error: stream input "user" message has no content',
        1,
    ),
    (
        '{"event":"user","message":{"content":[]}}',
        'error: stream input "user" message has no content',
        1,
    ),
    (
        '{"event":"control_request","request":{"subtype":"interrupt"}}',
        'error: stream input message event "control_request" is not supported yet',
        2,
    ),
    (
        '{"event":"control_response","response":{}}',
        'error: stream input message event "control_response" is not supported yet',
        2,
    ),
]


@pytest.mark.parametrize(("line", "stderr", "code"), VALIDATION_CASES)
def test_validation_errors_end_the_session(
    fake: Harness, line: str, stderr: str, code: int
) -> None:
    """A bad line after a good turn: ERROR result, exact stderr, exit code; rest unread."""
    done = fake.run(STREAM, [user("good"), line, user("never read")])
    assert done.code == code
    first, failed = done.results()
    assert first["status"] == "SUCCESS"
    assert failed["status"] == "ERROR"
    assert failed["error"] == stderr.removeprefix("error: ")
    assert failed["response"] == ""
    assert failed["num_turns"] == 1 and failed["usage"] == first["usage"]
    assert done.stderr == f"{stderr}\n"


@pytest.mark.parametrize(
    ("line", "stderr_prefix"),
    [
        ("this is not json", "error: invalid stream input message:"),
        ('["event","user"]', "error: invalid stream input message:"),
        (
            user([{"type": "image", "data": "AAAA", "mimeType": "image/png"}]),
            'error: stream input "user" message content block 0 has unsupported type "image"',
        ),
    ],
)
def test_undecodable_and_non_text_lines_exit_1(
    fake: Harness, line: str, stderr_prefix: str
) -> None:
    """Invalid JSON and non-text blocks: ERROR result and exit 1 (wording not captured)."""
    done = fake.run(STREAM, [line])
    assert done.code == 1
    [result] = done.results()
    assert result["status"] == "ERROR"
    assert done.stderr.startswith(stderr_prefix)


@pytest.mark.parametrize("command", ["model", "usage", "quota"])
def test_cli_slash_commands_are_refused_in_stream_input(fake: Harness, command: str) -> None:
    """/model and friends: the documented ERROR result, nothing on stderr, exit 2."""
    done = fake.run(STREAM, [user(f"/{command}")])
    assert done.code == 2
    [result] = done.results()
    assert result["error"] == (
        f"/{command} is answered by the CLI itself and is unavailable with --input-format "
        f"stream-json; run it as its own --print /{command} invocation"
    )
    assert (result["num_turns"], result["duration_seconds"]) == (0, 0)
    assert done.stderr == ""


def test_slash_commands_are_text_when_disabled(fake: Harness) -> None:
    """With --disable-slash-commands /model is an ordinary prompt (an assumption)."""
    done = fake.run([*STREAM, "--disable-slash-commands"], [user("/model")])
    assert done.code == 0
    assert done.results()[0]["response"] == "/model\n"


def test_unknown_events_warn_and_continue(fake: Harness) -> None:
    """Unknown events only warn on stderr; blank lines are skipped (§2.2)."""
    done = fake.run(STREAM, ['{"event":"ping"}', "", '{"event":"interrupt"}', user("hi")])
    assert done.code == 0
    assert done.stderr == (
        'warning: ignoring unsupported stream input message event "ping"\n'
        'warning: ignoring unsupported stream input message event "interrupt"\n'
    )
    assert [r["response"] for r in done.results()] == ["hi\n"]


def test_parse_input_line_verdicts() -> None:
    """The pure validator returns prompt, ignore and fatal verdicts."""
    assert parse_input_line(user("x").encode(), slash_commands=True) == UserPrompt("x")
    assert isinstance(parse_input_line(b'{"event":"x"}', slash_commands=True), Ignored)
    verdict = parse_input_line(user("/help").encode(), slash_commands=True)
    assert isinstance(verdict, Fatal) and verdict.exit_code == 2 and verdict.stderr is None
    assert parse_input_line(b"   ", slash_commands=True) is None
    assert parse_input_line(user("/plan it").encode(), slash_commands=True) == UserPrompt(
        "/plan it"
    )


# --- signals (contract.md §5) ----------------------------------------------------------


def first_fragment(event: Event) -> bool:
    return bool(event.get("step_update", {}).get("state") == "ACTIVE")


@pytest.mark.parametrize(
    ("signum", "error", "stderr"),
    [
        (signal.SIGINT, "interrupted", "error: interrupted"),
        (signal.SIGTERM, "context canceled", "context canceled"),
    ],
)
def test_signal_mid_turn_yields_an_error_result(
    fake: Harness, signum: int, error: str, stderr: str
) -> None:
    """SIGINT/SIGTERM mid-turn: ERROR result with partial text and counters, exit 1."""
    live = fake.start(STREAM, FAKE_AGY_SCENARIO="echo,slow")
    live.send(user("warm up"), user("long one"))
    events = live.until(lambda e: e["event"] == "result")
    first = events[-1]["result"]
    streamed = live.until(first_fragment)
    live.proc.send_signal(signum)
    events = live.until(lambda e: e["event"] == "result")
    result = events[-1]["result"]
    done = live.finish()
    assert done.code == 1
    assert done.events == []  # nothing after the result
    deltas = [
        e["step_update"]["text_delta"]
        for e in streamed + events[:-1]
        if "text_delta" in e.get("step_update", {})
    ]
    assert result["status"] == "ERROR" and result["error"] == error
    assert result["response"] == "".join(deltas)
    assert result["num_turns"] == 2
    assert result["usage"] == first["usage"]
    assert result["duration_seconds"] >= first["duration_seconds"]
    assert done.stderr == f"{stderr}\n"


@pytest.mark.parametrize(
    ("signum", "stderr"),
    [(signal.SIGINT, "error: interrupted"), (signal.SIGTERM, "context canceled")],
)
def test_signal_while_idle_exits_1_without_a_result(
    fake: Harness, signum: int, stderr: str
) -> None:
    """A signal between turns ends the process (exit 1) with no result to report."""
    live = fake.start(STREAM)
    live.event()
    live.proc.send_signal(signum)
    done = live.finish()
    assert (done.code, done.events, done.stderr) == (1, [], f"{stderr}\n")


def test_ignore_sigint_keeps_streaming_until_sigterm(fake: Harness) -> None:
    """ignore-sigint: SIGINT is swallowed mid-turn; SIGTERM still ends the turn."""
    live = fake.start(STREAM, FAKE_AGY_SCENARIO="ignore-sigint")
    live.send(user("go"))
    live.until(first_fragment)
    live.proc.send_signal(signal.SIGINT)
    fake.wait_for_log(lambda entry: entry.get("signal") == "SIGINT")
    live.until(first_fragment)  # still streaming after the SIGINT was handled
    live.proc.send_signal(signal.SIGTERM)
    result = live.until(lambda e: e["event"] == "result")[-1]["result"]
    done = live.finish()
    assert result["error"] == "context canceled"
    assert done.code == 1


def _marked_children(marker: str, parent: int, count: int) -> list[int]:
    """The marked processes but ``parent``, once ``count`` of them show.

    A child the fake started before its first fragment has exec'd, but the
    kernel sets the new image's environment bounds a moment later (after the
    close-on-exec pipe that ends `subprocess.Popen` is closed): until then its
    /proc environ reads empty. Nothing to wait on but /proc, so it is polled.
    """
    deadline = time.monotonic() + DEADLINE_S
    while True:
        children = sorted(pid for pid in marked_pids(marker) if pid != parent)
        if len(children) >= count or time.monotonic() > deadline:
            return children
        time.sleep(0.01)


def test_slow_children_live_in_the_expected_process_groups(fake: Harness) -> None:
    """slow spawns one child in the fake's group and one in its own session; they
    inherit the environment and outlive the fake (cleanup is the bridge's job)."""
    live = fake.start(
        STREAM, FAKE_AGY_SCENARIO="slow", FAKE_AGY_SPAWN_CHILDREN="1", FAKE_AGY_CHILD_SECONDS="60"
    )
    live.send(user("go"))
    live.until(first_fragment)
    fake_pid = live.proc.pid
    children = _marked_children(fake.marker, fake_pid, 2)
    assert len(children) == 2
    logged = {e["child"]["pid"]: e["child"] for e in fake.log_entries() if "child" in e}
    assert sorted(logged) == children
    fake_pgid = os.getpgid(fake_pid)
    assert fake_pgid == fake_pid  # started with start_new_session, like the bridge does
    groups = {pid: (os.getpgid(pid), os.getsid(pid)) for pid in children}
    shared = [pid for pid, (pgid, _) in groups.items() if pgid == fake_pgid]
    own = [pid for pid, (pgid, sid) in groups.items() if pgid == pid and sid == pid]
    assert len(shared) == 1 and len(own) == 1
    assert logged[own[0]]["own_session"] and not logged[shared[0]]["own_session"]
    for pid in children:
        assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].endswith(b"sleep")
    live.proc.send_signal(signal.SIGINT)
    done = live.finish()
    assert done.code == 1
    # The fake did not kill them: both are still running (the fixture kills them).
    assert sorted(marked_pids(fake.marker)) == children


# --- conversations (contract.md §1.1, §3.2) --------------------------------------------


def test_resume_continues_step_index_and_num_turns(fake: Harness) -> None:
    """--conversation <known id> resumes: same id, step_index after a gap, num_turns on."""
    first = fake.run(STREAM, [user("one"), user("two")])
    cid = init_of(first)["conversation_id"]
    last_index = max(step["step_index"] for step in first.steps())
    second = fake.run([*STREAM, "--conversation", cid], [user("three")])
    assert second.stderr == ""
    assert init_of(second)["conversation_id"] == cid
    [(steps, result)] = split_turns(second.events)
    assert steps[0]["step_index"] > last_index + 1
    assert result["num_turns"] == 3
    # usage is cumulative per process: only this process's steps count.
    assert result["usage"]["input_tokens"] == sum(
        s.get("usage", {}).get("input_tokens", 0) for s in steps
    )


@pytest.mark.parametrize("requested", ["0f1e2d3c-aaaa-4bbb-8ccc-123456789abc", "../etc/x"])
def test_unknown_conversation_warns_and_forks(fake: Harness, requested: str) -> None:
    """An unknown or malformed id warns on stderr and starts a new conversation, exit 0."""
    done = fake.run([*STREAM, "--conversation", requested], [user("hi")])
    assert done.code == 0
    assert done.stderr == f'warning: conversation "{requested}" not found\n'
    cid = init_of(done)["conversation_id"]
    assert cid != requested and UUID_RE.fullmatch(cid)
    assert done.results()[0]["num_turns"] == 1


def test_continue_picks_the_latest_conversation_of_the_workspace(fake: Harness) -> None:
    """-c resumes the most recent conversation recorded for the same --add-dir."""
    first = fake.run([*STREAM, "--add-dir", str(fake.cwd)], [user("one")])
    again = fake.run([*STREAM, "-c", "--add-dir", str(fake.cwd)], [user("two")])
    assert init_of(again)["conversation_id"] == init_of(first)["conversation_id"]
    assert again.results()[0]["num_turns"] == 2


# --- subcommands (contract.md §6) ------------------------------------------------------


def test_models_lists_slug_tab_display_and_ignores_stdin(fake: Harness) -> None:
    """`models`: TAB-separated rows on stdout, progress on stderr, exits with stdin open."""
    proc = subprocess.Popen(
        [*COMMAND, "models"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=fake.environment(),
    )
    try:
        stdout, stderr = proc.communicate(timeout=DEADLINE_S)  # closes stdin only at the end
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    rows = [line.split("\t") for line in stdout.decode().splitlines()]
    assert rows == [[slug, display] for slug, display in MODELS]
    assert stderr.decode() == "Fetching available models...\n"


def test_agents_lists_names(fake: Harness) -> None:
    """`agents`/`agent`: one name per line; FAKE_AGY_AGENTS chooses them."""
    assert fake.run(["agents"], FAKE_AGY_AGENTS="alpha, beta").stdout == "alpha\nbeta\n"
    assert fake.run(["agent"]).code == 0


@pytest.mark.parametrize("subcommand", ["models", "agents"])
def test_signed_out_subcommands_fail(fake: Harness, subcommand: str) -> None:
    """FAKE_AGY_SIGNED_OUT: the not-logged-in error on stderr, non-zero exit."""
    done = fake.run([subcommand], FAKE_AGY_SIGNED_OUT="1")
    assert done.code != 0 and done.stdout == ""
    assert done.stderr == "error getting token source: You are not logged into Antigravity.\n"


def test_signed_out_session_fails_its_first_turn(fake: Harness) -> None:
    """Signed out: init still appears (§3.1), the first turn fails with auth, exit 1."""
    done = fake.run(STREAM, [user("hi")], FAKE_AGY_SIGNED_OUT="1")
    init_of(done)
    assert done.code == 1
    assert "authentication required" in done.results()[0]["error"]


# --- scenarios -------------------------------------------------------------------------


def test_crash_exits_without_a_result(fake: Harness) -> None:
    """crash: fragments, a panic on stderr, exit 1, no result."""
    done = fake.run(STREAM, [user("hi")], FAKE_AGY_SCENARIO="crash")
    assert done.code == 1
    assert done.results() == [] and len(done.steps()) >= 2
    assert done.stderr.startswith("panic: ")


def test_truncated_leaves_half_a_line(fake: Harness) -> None:
    """truncated: stdout ends with an unterminated, unparsable fragment."""
    done = fake.run(
        STREAM, [user("hi")], FAKE_AGY_SCENARIO="truncated", FAKE_AGY_CRASH_EXIT_CODE="2"
    )
    assert done.code == 2
    assert not done.stdout.endswith("\n")
    with pytest.raises(ValueError):
        json.loads(done.stdout.splitlines()[-1])


def test_tool_step_is_shaped_like_the_captures(fake: Harness) -> None:
    """tool: run_command ACTIVE then DONE on one step_index, then a reply."""
    done = fake.run(STREAM, [user("run it")], FAKE_AGY_SCENARIO="tool")
    tools = [s for s in done.steps() if s["step_type"] == "tool"]
    assert [t["state"] for t in tools] == ["ACTIVE", "DONE"]
    assert tools[0]["step_index"] == tools[1]["step_index"]
    for step in tools:
        assert step["tool_name"] == step["tool_info"]["name"] == "run_command"
        assert step["tool_info"]["parameters"] == {"CommandLine": "echo hello_headless_demo"}
    assert tools[1]["tool_info"]["output"] == "hello_headless_demo\n"
    assert list(tools[1]) == [
        "conversation_id",
        "step_index",
        "state",
        "step_type",
        "tool_name",
        "duration_seconds",
        "tool_info",
    ]
    [(steps, result)] = split_turns(done.events)
    check_turn(steps, result)


def test_tool_error_step(fake: Harness) -> None:
    """tool-error: the step ends ERROR with tool_info.error{type,message}."""
    done = fake.run(STREAM, [user("run it")], FAKE_AGY_SCENARIO="tool-error")
    failed = [s for s in done.steps() if s["state"] == "ERROR"]
    assert failed[0]["tool_info"]["error"]["type"] == "TOOL_ERROR"
    assert done.results()[0]["status"] == "SUCCESS"


def test_quota_error_exits_3_with_agy_error_line(fake: Harness) -> None:
    """quota: error_message step, ERROR result, `error:` + AGY_ERROR lines, exit 3."""
    done = fake.run(STREAM, [user("hi"), user("unread")], FAKE_AGY_SCENARIO="quota")
    assert done.code == 3
    [(steps, result)] = split_turns(done.events)
    assert [s["step_type"] for s in steps] == ["user_input", "error_message"]
    assert result["status"] == "ERROR" and result["response"] == ""
    assert result["error"].startswith("Individual quota reached.")
    assert set(result["usage"].values()) == {0} and result["num_turns"] == 1
    error_line, agy_error = done.stderr.splitlines()
    assert error_line == f"error: {result['error']}"
    details = json.loads(agy_error.removeprefix("AGY_ERROR: "))
    assert details["status"] == "RESOURCE_EXHAUSTED" and details["error_code"] == 429
    assert details["short_error"] == f"RESOURCE_EXHAUSTED (code 429): {result['error']}"
    assert details["retryable"] is True and details["code_kind"] == "http"


def test_quota_continue_keeps_serving(fake: Harness) -> None:
    """FAKE_AGY_QUOTA_CONTINUE: the session survives an API error (CL 1.2.10)."""
    done = fake.run(
        STREAM,
        [user("hi"), user("again")],
        FAKE_AGY_SCENARIO="quota,echo",
        FAKE_AGY_QUOTA_CONTINUE="1",
    )
    assert done.code == 0
    assert [r["status"] for r in done.results()] == ["ERROR", "SUCCESS"]


def test_soft_deny(fake: Harness) -> None:
    """soft-deny: jetski line on stderr, SUCCESS, empty response, denied_actions."""
    done = fake.run(STREAM, [user("rm it")], FAKE_AGY_SCENARIO="soft-deny")
    assert done.code == 0
    [result] = done.results()
    assert result["status"] == "SUCCESS" and result["response"] == ""
    assert result["denied_actions"] == [{"action": "command", "display_name": "RunCommand"}]
    assert done.stderr.startswith('jetski: no output produced — a tool required the "command"')


def test_soft_deny_runs_the_tool_when_permissions_are_skipped(fake: Harness) -> None:
    """With --dangerously-skip-permissions nothing is denied."""
    done = fake.run(
        [*STREAM, "--dangerously-skip-permissions"], [user("rm it")], FAKE_AGY_SCENARIO="soft-deny"
    )
    [result] = done.results()
    assert "denied_actions" not in result and result["response"]
    assert done.stderr == ""


def test_print_timeout_scenario(fake: Harness) -> None:
    """print-timeout: partial text, `[agy] print timeout` on stderr, ERROR result, exit 0."""
    done = fake.run(STREAM, [user("hi"), user("unread")], FAKE_AGY_SCENARIO="print-timeout")
    assert done.code == 0
    [result] = done.results()
    assert result["status"] == "ERROR" and result["response"] == "Partial answer"
    assert done.stderr.startswith("[agy] print timeout")


def test_print_timeout_flag_cuts_a_slow_turn(fake: Harness) -> None:
    """--print-timeout 300ms ends a slow turn after at least 300 ms like the scenario."""
    started = time.monotonic()
    done = fake.run([*STREAM, "--print-timeout", "300ms"], [user("go")], FAKE_AGY_SCENARIO="slow")
    assert time.monotonic() - started >= 0.3
    assert done.code == 0
    assert done.results()[0]["status"] == "ERROR"
    assert done.stderr.startswith("[agy] print timeout (300ms)")


def test_noise_adds_one_non_json_line(fake: Harness) -> None:
    """noise: a non-JSON line amid an otherwise normal turn."""
    done = fake.run(STREAM, [user("hi")], FAKE_AGY_SCENARIO="noise")
    bad = [line for line in done.stdout.splitlines() if not line.startswith("{")]
    assert len(bad) == 1
    [(steps, result)] = split_turns(done.events)
    check_turn(steps, result)


def test_silent_exit(fake: Harness) -> None:
    """silent-exit: exit 0 mid-turn without a result."""
    done = fake.run(STREAM, [user("hi")], FAKE_AGY_SCENARIO="silent-exit")
    assert done.code == 0 and done.results() == [] and done.steps()


def test_multi_response(fake: Harness) -> None:
    """multi-response: two agent_response steps; response is their concatenation."""
    done = fake.run(STREAM, [user("hi")], FAKE_AGY_SCENARIO="multi-response")
    [(steps, result)] = split_turns(done.events)
    check_turn(steps, result)
    indexes = {s["step_index"] for s in steps if s["step_type"] == "agent_response"}
    assert len(indexes) == 2
    assert result["response"] == "LAUNCHED\nRESULT=42\n"


def test_unavailable_at_startup_is_a_pre_turn_error(fake: Harness) -> None:
    """unavailable first: no init, a 503 ERROR result with empty conversation_id, exit 1."""
    done = fake.run(STREAM, [user("hi")], FAKE_AGY_SCENARIO="unavailable")
    assert done.code == 1
    [event] = done.events
    assert event["result"]["conversation_id"] == ""
    assert "UNAVAILABLE (code 503)" in event["result"]["error"]


def test_scenario_list_and_prompt_directive(fake: Harness) -> None:
    """FAKE_AGY_SCENARIO lists per-turn scenarios; [fake-agy:NAME] overrides a turn."""
    done = fake.run(
        STREAM,
        [user("a"), user("b [fake-agy:tool]"), user("c")],
        FAKE_AGY_SCENARIO="echo,multi-response",
    )
    responses = [r["response"] for r in done.results()]
    assert responses == [
        "a\n",
        "The command printed hello_headless_demo.\n",
        "LAUNCHED\nRESULT=42\n",
    ]


def test_fake_misuse_exits_64(fake: Harness) -> None:
    """Unknown scenarios and bad knob values are the test author's error: exit 64."""
    assert fake.run(STREAM, FAKE_AGY_SCENARIO="nope").code == 64
    assert fake.run(STREAM, FAKE_AGY_FRAGMENT_DELAY="soon").code == 64
    bad = fake.run(STREAM, FAKE_AGY_TOOL_PERMISSION="sometimes")
    assert bad.code == 64 and "FAKE_AGY_TOOL_PERMISSION must be one of" in bad.stderr
    assert fake.run(STREAM, [user("[fake-agy:nope]")]).code == 64


def test_json_schema_structured_output(fake: Harness, tmp_path: Path) -> None:
    """--json-schema: init.json_schema, result.structured_output, serialized response."""
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "score": {"type": "integer"}},
    }
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    for value in (json.dumps(schema), str(path)):
        done = fake.run([*STREAM, "--json-schema", value], [user("yes")])
        assert init_of(done)["init"]["json_schema"] == schema
        [result] = done.results()
        assert result["structured_output"] == {"answer": "yes", "score": 1}
        assert json.loads(result["response"]) == result["structured_output"]


@pytest.mark.parametrize("value", ["string", '{"type":"string"}', "/does/not/exist.json"])
def test_bad_json_schema_fails_at_startup(fake: Harness, value: str) -> None:
    """1.2.14 rejects bare type names, non-object roots and missing files: exit 1."""
    done = fake.run([*STREAM, "--json-schema", value])
    assert done.code == 1
    [event] = done.events
    assert event["result"]["conversation_id"] == "" and event["result"]["status"] == "ERROR"


def test_mode_with_disabled_slash_commands_warns(fake: Harness) -> None:
    """--mode plan + --disable-slash-commands prints the 1.1.14 warning."""
    done = fake.run([*STREAM, "--mode", "plan", "--disable-slash-commands"])
    assert done.stderr == (
        "warning: --mode plan has no effect while slash command expansion is disabled.\n"
    )


def test_pure_helpers() -> None:
    """Fragments split in two or more; schema examples are minimal."""
    assert split_fragments("hello") == ["hel", "lo"]
    assert split_fragments("x") == ["x"]
    assert "".join(split_fragments("a" * 100)) == "a" * 100
    assert example_for_schema({"type": "array", "items": {"enum": ["a"]}}, "p") == ["a"]


# --- replay (FAKE_AGY_REPLAY) ----------------------------------------------------------


def sample_captures() -> list[Path]:
    return sorted(SAMPLES.glob("*.ndjson"))


def check_replay(fake: Harness, capture: Path) -> Done:
    lines = [line for line in capture.read_text().splitlines() if line.strip()]
    parsed = parse_capture(capture.read_text())
    done = fake.run(
        STREAM, [user(f"turn {i}") for i in range(len(parsed.turns))], FAKE_AGY_REPLAY=str(capture)
    )
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == lines
    return done


@pytest.mark.parametrize("capture", sample_captures(), ids=lambda p: p.name)
def test_replay_each_sample_verbatim(fake: Harness, capture: Path) -> None:
    """Each capture replays verbatim: its init at start, one captured turn per stdin turn."""
    check_replay(fake, capture)


def test_replay_samples_present() -> None:
    """The replay table is not silently empty."""
    assert len(sample_captures()) >= 10


def test_replay_synthetic_then_echo_continues_counters(fake: Harness) -> None:
    """After the capture runs out, echo turns continue its id, indexes and usage."""
    capture = DATA / "synthetic-tool-two-turn.ndjson"
    check_replay(fake, capture)
    done = fake.run(STREAM, [user("1"), user("2"), user("three")], FAKE_AGY_REPLAY=str(capture))
    steps, result = split_turns(done.events)[-1]
    parsed = parse_capture(capture.read_text())
    assert result["conversation_id"] == parsed.conversation_id
    assert steps[0]["step_index"] > parsed.last_step_index
    assert result["num_turns"] == 3
    added = sum(s.get("usage", {}).get("total_tokens", 0) for s in steps)
    assert result["usage"]["total_tokens"] == parsed.usage.total_tokens + added
    assert result["response"] == "three\n"


def test_replay_pre_turn_capture_on_first_turn(fake: Harness) -> None:
    """A capture of only a result (invalid model) has no init and replays on turn one."""
    capture = SAMPLES / "tiezbro-1.1.14-invalid-model-error.ndjson"
    assert fake.run(STREAM, FAKE_AGY_REPLAY=str(capture)).stdout == ""
    done = fake.run(STREAM, [user("x")], FAKE_AGY_REPLAY=str(capture))
    assert done.stdout == capture.read_text().strip() + "\n"


# --- launch log, launchers -------------------------------------------------------------


def test_launch_log_records_argv_env_and_stdin(fake: Harness) -> None:
    """FAKE_AGY_LAUNCH_LOG: argv, cwd, pid, pgid, filtered env, each stdin line, exit."""
    args = [*STREAM, "--add-dir", str(fake.cwd)]
    live = fake.start(args, AGY_CLI_DISABLE_AUTO_UPDATE="1", UNRELATED_VAR="x")
    live.send(user("hi"), "garbage")
    done = live.finish()
    assert done.code == 1
    entries = fake.log_entries()
    launch = entries[0]
    assert launch["argv"] == args
    assert launch["pid"] == live.proc.pid
    assert launch["cwd"] == str(fake.cwd)
    assert launch["pgid"] == live.proc.pid  # its own group: Live uses start_new_session
    assert launch["env"]["AGY_CLI_DISABLE_AUTO_UPDATE"] == "1"
    assert "UNRELATED_VAR" not in launch["env"] and "PATH" not in launch["env"]
    assert all(key.startswith(("FAKE_AGY_", "AGY_")) for key in launch["env"])
    assert [e["stdin"] for e in entries if "stdin" in e] == [user("hi"), "garbage"]
    assert entries[-1] == {"pid": live.proc.pid, "exit": 1}


def test_bin_launcher_works_from_any_cwd_and_keeps_the_pid(fake: Harness, tmp_path: Path) -> None:
    """bin/fake-agy finds the repo itself and execs the fake (same pid for signals)."""
    launcher = REPO / "bin" / "fake-agy"
    assert os.access(launcher, os.X_OK)
    env = fake.environment()
    del env["PYTHONPATH"]
    proc = subprocess.run(
        [str(launcher), "--version"],
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=DEADLINE_S,
        check=False,
    )
    assert (proc.returncode, proc.stdout) == (0, f"{VERSION}\n".encode())
    live = subprocess.Popen(
        [str(launcher), *STREAM],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    try:
        live.communicate(user("hi").encode(), timeout=DEADLINE_S)
    finally:
        if live.poll() is None:
            live.kill()
            live.wait()
    launches = [e for e in fake.log_entries() if "argv" in e]
    assert launches[-1]["pid"] == live.pid

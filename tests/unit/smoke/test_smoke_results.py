"""The smoke runner's verdicts without processes: causes, expectations, baselines, reports."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agybridge.jsonrpc import RpcError
from agybridge.smoke import expectations, reports
from agybridge.smoke.causes import Cause, from_agy_error, from_rpc_error, go_duration_s
from agybridge.smoke.model import Budget, Case, Cell, Expect
from agybridge.smoke.progress import Progress
from agybridge.smoke.results import CellRecord, CellResult, Failure, ToolCall, TurnRecord


def record(text: str = "PONG", stop: str = "end_turn", tokens: int = 10) -> CellRecord:
    rec = CellRecord()
    rec.turns.append(
        TurnRecord("p", sent_s=1.0, first_chunk_s=1.5, ended_s=3.0, stop_reason=stop, text=text)
    )
    rec.turns[-1].tokens = tokens
    return rec


def case(**expect: object) -> Case:
    return Case(name="c", prompts=("p",), expect=Expect(**expect))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- causes


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("100h23m59s", 100 * 3600 + 23 * 60 + 59), ("42s", 42), ("1.5m", 90), ("250ms", 0.25)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert go_duration_s(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "5 minutes", "5x"])
def test_not_go_durations(text: str) -> None:
    assert go_duration_s(text) is None


def test_agy_errors_are_classified_from_the_bridge_fields() -> None:
    later = from_agy_error(
        {"error": "quota", "errorCode": 429, "resetsIn": "100h23m59s", "retryable": True}, 60
    )
    assert (later.kind, later.transient) == ("quota", False)  # resets after 60 s
    soon = from_agy_error({"error": "quota", "errorCode": 429, "resetsIn": "30s"}, 60)
    assert (soon.kind, soon.transient, soon.retry_after_s) == ("quota", True, 30.0)
    limit = from_agy_error({"error": "slow down", "status": "RESOURCE_EXHAUSTED"}, 60)
    assert (limit.kind, limit.transient) == ("rate_limited", True)
    down = from_agy_error({"error": "down", "errorCode": 503, "retryable": True}, 60)
    assert (down.kind, down.transient) == ("unavailable", True)
    refused = from_agy_error({"error": "down", "errorCode": 503, "retryable": False}, 60)
    assert refused.transient is False
    other = from_agy_error({"error": "bad request", "errorCode": 400}, 60)
    assert (other.kind, other.transient) == ("agy_error", False)


def test_rpc_errors_are_classified_from_their_data() -> None:
    auth = from_rpc_error(RpcError(-32000, "agy is not signed in", {"details": "x"}), 60)
    assert auth.kind == "not_signed_in" and not auth.transient
    crash = RpcError(-32603, "agy exited", {"exitCode": 2, "stderrTail": ["panic: nil map"]})
    assert from_rpc_error(crash, 60).kind == "agy_crashed"
    agy_error = 'AGY_ERROR: {"error_code": 503, "status": "UNAVAILABLE", "retryable": true}'
    exited = RpcError(-32603, "agy exited", {"exitCode": 3, "stderrTail": ["error: x", agy_error]})
    found = from_rpc_error(exited, 60)
    assert (found.kind, found.transient) == ("unavailable", True)
    signed_out = RpcError(-32603, "agy exited", {"stderrTail": ["Error: please sign in"]})
    assert from_rpc_error(signed_out, 60).kind == "not_signed_in"
    other = from_rpc_error(RpcError(-32603, "Internal error", {"details": "KeyError"}), 60)
    assert other.kind == "bridge_error" and "-32603" in other.message


# --------------------------------------------------------------------------- expectations


def test_every_expectation_that_holds_passes(tmp_path: Path) -> None:
    (tmp_path / "out.txt").write_text("all done\n")
    rec = record('{"answer": "PONG"}')
    rec.workspace = str(tmp_path)
    rec.tool_calls["t"] = ToolCall("t", kind="execute", status="completed")
    expect = case(
        contains=("PONG",),
        not_contains=("PING",),
        regex=(re.compile(r'"answer":\s*"P'),),
        schema={"type": "object", "required": ["answer"]},
        json_schema=Path("s.json"),
        stop_reason="end_turn",
        tool_kinds=("execute",),
        files={"out.txt": "done"},
        max_seconds=5.0,
        max_tokens=10,
    )
    assert expectations.check(expect, rec) == []


def test_each_miss_names_expected_and_seen(tmp_path: Path) -> None:
    rec = record("PING", stop="cancelled", tokens=50)
    rec.workspace = str(tmp_path)
    expect = case(
        contains=("PONG",),
        not_contains=("PING",),
        regex=(re.compile("^X"),),
        schema={"type": "object"},
        json_schema=Path("s.json"),
        stop_reason="end_turn",
        tool_kinds=("edit",),
        files={"out.txt": "done"},
        max_seconds=1.0,
        max_tokens=10,
    )
    failures = {f.expectation: f for f in expectations.check(expect, rec)}
    assert set(failures) == {
        "expect.contains",
        "expect.not_contains",
        "expect.regex",
        "expect.json_schema",
        "expect.stop_reason",
        "expect.tool_kinds",
        "expect.files",
        "expect.max_seconds",
        "expect.max_tokens",
    }
    assert failures["expect.contains"].expected == "text containing 'PONG'"
    assert failures["expect.contains"].seen == '"PING"'
    assert failures["expect.stop_reason"].seen == "cancelled"
    assert failures["expect.max_seconds"].seen == "2.00 s"
    assert failures["expect.max_tokens"].seen == "50"


def test_images_error_and_listed_expectations() -> None:
    """An image count, an expected refusal and session/list: held, then each missed."""
    held = record()
    held.turns[-1].images = {"file:///a.png", "b1f0"}
    held.listed = True
    assert expectations.check(case(images=2, listed=True), held) == []
    refused = record()
    refused.turns[-1].refused = "invalid_params"
    assert expectations.check(case(error="invalid_params"), refused) == []

    missed = {f.expectation: f for f in expectations.check(case(images=3, listed=True), held)}
    assert missed["expect.images"].text() == "expect.images: expected at least 3 image(s); seen 2"
    held.listed = False
    assert expectations.check(case(listed=True), held)[0].text() == (
        "expect.listed: expected the session in session/list; seen not listed"
    )
    (wrong,) = expectations.check(case(error="attachment_invalid"), refused)
    assert wrong.seen == "an error naming 'invalid_params'"
    (answered,) = expectations.check(case(error="invalid_params"), record())
    assert answered.text() == (
        "expect.error: expected an error naming 'invalid_params'; "
        "seen the prompt answered (end_turn)"
    )


def test_structured_output_wins_over_text_for_json_schema() -> None:
    rec = record("not json")
    rec.turns[-1].structured_output = {"answer": 1}
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    (miss,) = expectations.check(case(schema=schema, json_schema=Path("s.json")), rec)
    assert "['answer']" in miss.seen and "is not of type 'string'" in miss.seen


def test_permissions_fail_and_budget_are_failures() -> None:
    rec = record()
    rec.permissions.append({"title": "Run rm -rf", "kind": "execute", "answer": "reject_once"})
    rec.budget_exceeded = "budget.max_tokens 5 exceeded (10 tokens)"
    strict = Case(name="c", prompts=("p",), permissions="fail", budget=Budget(max_tokens=5))
    kinds = [f.expectation for f in expectations.check(strict, rec)]
    assert kinds == ["permissions", "budget"]


# --------------------------------------------------------------------------- baseline


def result(
    name: str, status: str = "passed", duration: float = 2.0, tokens: int = 100
) -> CellResult:
    cell = Cell(0, Case(name=name, prompts=("p",)), {"mode": "safe"})
    res = CellResult(cell, status, record=record(tokens=tokens))  # type: ignore[arg-type]
    res.started_s, res.ended_s = 1.0, 1.0 + duration
    return res


# --------------------------------------------------------------------------- reports


def test_junit_keeps_failures_errors_and_skips_apart() -> None:
    passed = result("ok")
    failed = result("bad", status="failed")
    failed.failures = [Failure("expect.contains", "text containing 'PONG'", '"PING"')]
    broken = result("crash", status="error")
    broken.error = Cause("agy_crashed", "agy exited (exit code 2)\x01", details={"exitCode": 2})
    skipped = CellResult(Cell(3, Case(name="s", prompts=("p",)), {}), "skipped", skip_reason="why")
    passed.record.transcript = ["> p", "agent: PONG"]
    root = ET.fromstring(reports.junit([passed, failed, broken, skipped], "m.toml", 4.0))
    (suite,) = root.findall("testsuite")
    assert suite.attrib["tests"] == "4" and suite.attrib["failures"] == "1"
    assert suite.attrib["errors"] == "1" and suite.attrib["skipped"] == "1"
    cases = {tc.attrib["classname"]: tc for tc in suite.findall("testcase")}
    assert cases["ok"].attrib["name"] == "mode=safe"
    assert cases["ok"].findtext("system-out") == "> p\nagent: PONG"
    failure = cases["bad"].find("failure")
    assert failure is not None and cases["bad"].find("error") is None
    assert failure.attrib["message"] == "expected text containing 'PONG'; seen \"PING\""
    error = cases["crash"].find("error")
    assert error is not None and cases["crash"].find("failure") is None
    assert error.attrib["type"] == "agy_crashed" and "exitCode: 2" in (error.text or "")
    assert cases["s"].find("skipped") is not None


def test_json_report_carries_every_cell() -> None:
    data = reports.json_report([result("a")], {"matrix": "m.toml"}, 2.5)
    json.dumps(data)  # serialisable
    (cell,) = data["cells"]
    assert data["counts"] == {"passed": 1, "flaky": 0, "failed": 0, "error": 0, "skipped": 0}
    assert cell["id"] == "a [mode=safe]" and cell["tokens"] == 100
    assert cell["first_chunk_s"] == 0.5 and cell["stop_reason"] == "end_turn"


# --------------------------------------------------------------------------- progress


async def test_progress_plain_lines_and_live_block() -> None:
    cell = Cell(0, Case(name="a", prompts=("p",)), {"mode": "safe"})
    plain_out = io.StringIO()
    plain = Progress(plain_out, 2, live=False, verbose=True)
    plain.cell_started(cell)
    plain.cell_line(cell, "> p")
    failed = result("a", status="failed")
    failed.failures = [Failure("expect.contains", "text containing 'X'", '"p"')]
    plain.cell_finished(failed)
    assert plain_out.getvalue().splitlines() == [
        "START a [mode=safe]",
        "  [a [mode=safe]] > p",
        "FAIL  a [mode=safe]  2.00s  expect.contains: expected text containing 'X'; seen \"p\"",
    ]
    live_out = io.StringIO()
    live = Progress(live_out, 2, live=True, verbose=False)
    live.cell_started(cell)
    first = live_out.getvalue()
    assert "0/2 done" in first and "1 running" in first and "▸ a [mode=safe]" in first
    live.cell_finished(result("a"))
    second = live_out.getvalue()[len(first) :]
    # The block (header + one running cell) is erased, the result printed above a new block.
    assert second.startswith("\x1b[2F\x1b[J" + "PASS  a [mode=safe]  2.00s\n")
    assert "1/2 done · 1 passed" in second and "▸" not in second
    live.close()
    assert live_out.getvalue().endswith("\x1b[1F\x1b[J")


def test_reports_stay_valid_with_any_character_in_names_and_output(tmp_path: Path) -> None:
    """Control characters, U+FFFE/U+FFFF and a lone surrogate (a "\\ud800" escape the
    bridge passed on) in a case name, a skip reason or agy's output: the JUnit file is
    still well-formed XML and the JSON and Markdown files are still written as UTF-8."""
    odd = "a\x01b\ufffe\uffffc\ud800d"
    passed = result(f"name{odd}")
    passed.record.transcript = [f"agent: {odd}"]
    passed.record.turns[-1].text = odd
    skipped = CellResult(
        Cell(1, Case(name=f"s{odd}", prompts=("p",)), {"mode": odd}),
        "skipped",
        skip_reason=f"skip_if: mode == '{odd}'",
    )
    data = reports.junit([passed, skipped], f"m{odd}.toml", 1.0)
    root = ET.fromstring(data)
    names = [tc.attrib["classname"] for tc in root.iter("testcase")]
    assert all(name.startswith(("name", "s")) for name in names)
    report = reports.json_report([passed, skipped], {"matrix": "m.toml"}, 1.0)
    reports.write(tmp_path / "r.json", reports.json_text(report))
    loaded = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert loaded["cells"][0]["turns"][0]["text"].startswith("a\x01b")
    reports.write(tmp_path / "r.md", reports.markdown([passed, skipped], "m.toml", 1.0))
    reports.append(tmp_path / "summary.md", reports.markdown([passed], "m.toml", 1.0))
    assert "name" in (tmp_path / "r.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("value", ["nan", "NaN", "0.5"])
def test_growth_limits_that_compare_nothing_are_refused(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--max-slowdown nan would pass every cell whatever its time: a usage error."""
    from agybridge.smoke import cli as smoke_cli  # noqa: PLC0415

    with pytest.raises(SystemExit) as exited:
        smoke_cli.parser().parse_args(["run", "m.toml", "--max-slowdown", value])
    assert exited.value.code == 2 and "--max-slowdown" in capsys.readouterr().err

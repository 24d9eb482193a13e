"""Issue 29, problems 1 and 5: errors that passed and misclassified errors.

The runner reads the bridge's own signals (prompt error data, ``_meta.agyError``, its
reply notices, a ``cancelled`` stop nobody asked for) and names one `CAUSES` id; a turn
cut short is never ``end_turn``; ``tool_kinds`` counts completed tools only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agybridge.jsonrpc import RpcError
from agybridge.smoke import causes, expectations, schemas
from agybridge.smoke.causes import CAUSES, Cause, from_agy_error, from_notices, from_rpc_error
from agybridge.smoke.model import Case, Expect
from agybridge.smoke.results import CellRecord, ToolCall, TurnRecord
from agybridge.translate import notices


def record(text: str = "PONG", stop: str = "end_turn") -> CellRecord:
    rec = CellRecord()
    rec.turns.append(TurnRecord("p", sent_s=0.0, ended_s=1.0, stop_reason=stop, text=text))
    return rec


def case(**expect: object) -> Case:
    return Case(name="c", prompts=("p",), expect=Expect(**expect))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        # The bridge's own notice (agybridge.translate.notices), as it reaches the client.
        ("Partial answer\n\n⚠️ " + notices.PRINT_TIMEOUT_MESSAGE, "print_timeout"),
        # What the bridge writes today for agy's print-timeout ERROR result.
        ("Partial answer\n\n⚠️ agy error: print timeout (5m0s) reached", "print_timeout"),
        ("⚠️ agy error: model overloaded, try later", "agy_error"),
        ("All fine: PONG", None),
    ],
)
def test_bridge_notices_name_their_cause(text: str, kind: str | None) -> None:
    found = from_notices(text)
    assert (found.kind if found else None) == kind
    if found is not None:
        assert "the bridge reported" in found.message and not found.transient


def test_a_turn_cut_short_is_never_end_turn() -> None:
    """Problem 1: expect.stop_reason = "end_turn" fails for a print-timed-out turn even
    though the wire said end_turn (the runner also makes the cell an error)."""
    rec = record("Partial answer\n\n⚠️ agy error: print timeout (5m0s) reached")
    rec.turns[-1].end_cause = "print_timeout"
    (miss,) = expectations.check(case(stop_reason="end_turn"), rec)
    assert (miss.expectation, miss.seen) == ("expect.stop_reason", "print_timeout")


@pytest.mark.parametrize(
    ("error", "kind", "transient"),
    [
        # The bridge's stall error (agybridge.session.output.silence_error).
        (
            RpcError(-32603, "agy printed nothing for 1 s", {"reason": "stall", "stderrTail": []}),
            "stall_timeout",
            False,
        ),
        (RpcError(-32603, "agy did not start", {"reason": "startup"}), "agy_start_timeout", True),
        # Problem 5: a 503 before the turn started is transient (retried), not agy_error.
        (
            RpcError(
                -32603,
                "agy failed before the turn started: Eligibility check failed: "
                "UNAVAILABLE (code 503): The service is currently unavailable.",
                {"details": "agy failed before the turn started: ... UNAVAILABLE (code 503)"},
            ),
            "unavailable",
            True,
        ),
        # Problem 5: a bad model (or mode, effort) is the setting's fault, not the bridge's.
        (
            RpcError(-32602, "invalid model selection", {"availableModels": ["x"]}),
            "invalid_model",
            False,
        ),
        (RpcError(-32602, "no such mode", {}), "invalid_setting", False),
        # agybridge names the cause itself: taken as it is, transient from the catalogue.
        (
            RpcError(-32043, "503", {"_meta": {"agybridge": {"cause": "unavailable"}}}),
            "unavailable",
            True,
        ),
        (
            RpcError(-32040, "x", {"_meta": {"agybridge": {"cause": "agy_not_executable"}}}),
            "agy_not_executable",
            False,
        ),
        (RpcError(-32603, "Internal error", {"details": "KeyError"}), "bridge_error", False),
    ],
)
def test_rpc_errors_are_classified(error: RpcError, kind: str, transient: bool) -> None:
    found = from_rpc_error(error, 60)
    assert (found.kind, found.transient) == (kind, transient)


def test_transient_comes_from_the_one_table() -> None:
    for kind, row in CAUSES.items():
        assert Cause(kind, "m").transient is row.transient
    # agy's own "retryable: false" vetoes a retry whatever the kind.
    assert Cause("unavailable", "m", final=True).transient is False
    with pytest.raises(ValueError, match="must be in"):
        Cause("no_such_cause", "m")
    assert causes.interrupted().kind == "interrupted"


def test_the_published_report_schema_lists_every_cause() -> None:
    listed = schemas.load("report")["$defs"]["error"]["properties"]["cause"]["enum"]
    assert listed == list(CAUSES)


def test_tool_kinds_count_only_completed_tools() -> None:
    """Problem 1: a failed tool no longer satisfies expect.tool_kinds."""
    rec = record()
    rec.tool_calls["t"] = ToolCall("t", kind="execute", status="failed")
    (miss,) = expectations.check(case(tool_kinds=("execute",)), rec)
    assert miss.expectation == "expect.tool_kinds"
    assert miss.expected == "a 'execute' tool call that completed"
    assert miss.seen == "execute (failed)"
    # Asking for attempts is explicit.
    assert expectations.check(case(tool_attempts=("execute",)), rec) == []
    rec.tool_calls["t"].status = "completed"
    assert expectations.check(case(tool_kinds=("execute",)), rec) == []


def test_negative_expectations(tmp_path: Path) -> None:
    rec = record("the secret is 42")
    rec.workspace = str(tmp_path)
    (tmp_path / "left.txt").write_text("x")
    rec.tool_calls["t"] = ToolCall("t", kind="edit", status="failed")
    found = expectations.check(
        case(
            no_tools=True,
            not_tool_kinds=("edit",),
            files_absent=("left.txt", "never.txt"),
            not_contains=("secret",),
        ),
        rec,
    )
    assert [(f.expectation, f.seen) for f in found] == [
        ("expect.not_contains", '"the secret is 42"'),
        ("expect.no_tools", "edit (failed)"),
        ("expect.not_tool_kinds", "edit (failed)"),
        ("expect.files_absent", "left.txt exists"),
    ]
    clean = record("nothing to hide")
    clean.workspace = str(tmp_path / "empty")
    assert expectations.check(case(no_tools=True, files_absent=("left.txt",)), clean) == []


def test_text_expectations_fill_placeholders() -> None:
    rec = record("hello Ada")
    expect = case(contains=("hello {{who}}",), not_contains=("bye {{who}}",))
    assert expectations.check(expect, rec, {"who": "Ada"}) == []
    (miss,) = expectations.check(expect, rec, {"who": "Bob"})
    assert miss.expected == "text containing 'hello Bob'"


def test_a_turn_cause_the_bridge_names_is_the_cell_cause() -> None:
    """A prompt response's ``_meta.agybridge.cause`` (print timeout, interrupted,
    quota...) is the cause, with the catalogue's transient flag; a quota that
    resets later than the runner waits is not retried."""
    timed_out = causes.from_response_meta({"agybridge": {"cause": "print_timeout"}}, 60)
    assert timed_out is not None and (timed_out.kind, timed_out.transient) == (
        "print_timeout",
        False,
    )
    soon = {"agybridge": {"cause": "quota", "resetsIn": "30s"}}
    later = {"agybridge": {"cause": "quota", "resetsIn": "100h23m59s"}}
    found_soon, found_later = (causes.from_response_meta(m, 60) for m in (soon, later))
    assert found_soon is not None and (found_soon.transient, found_soon.retry_after_s) == (
        True,
        30.0,
    )
    assert found_later is not None and found_later.transient is False
    assert causes.from_response_meta({"usage": {}}, 60) is None


async def test_a_cancelled_turn_nobody_asked_for_is_an_interruption(tmp_path: Path) -> None:
    """The bridge answers ``cancelled`` when agy reports INTERRUPTED / CANCELED; if the
    runner sent no session/cancel (no budget ran out), agy was interrupted: an error,
    never a pass. A budget's own cancellation stays a budget failure."""
    from agybridge.smoke.cell import Setup, _Conversation  # noqa: PLC0415 - the unit under test
    from agybridge.smoke.model import Cell, RunConfig  # noqa: PLC0415

    setup = Setup(("bridge",), {}, tmp_path, RunConfig(), "run")
    cell = Cell(0, Case(name="c", prompts=("p",)), {})
    conversation = _Conversation(cell, setup, CellRecord(), tmp_path, lambda text: None)
    turn = TurnRecord("p", sent_s=0.0, ended_s=1.0, stop_reason="cancelled", text="partial")
    found = conversation._turn_cause(turn)
    assert found is not None and found.kind == "interrupted"
    conversation.cancel_sent = True
    assert conversation._turn_cause(turn) is None
    quota = TurnRecord("p", sent_s=0.0, stop_reason="end_turn", agy_error={"errorCode": 429})
    limited = conversation._turn_cause(quota)
    assert limited is not None and limited.kind == "rate_limited"


def test_an_agy_error_known_only_by_its_words_is_classified_by_its_status() -> None:
    """A prompt response whose ``_meta.agyError`` has agy's text only (the turn
    ended before agy's AGY_ERROR line was read): a 503 in the words is still
    ``unavailable`` (retried), as it is when it fails a request."""
    text = "Eligibility check failed: UNAVAILABLE (code 503): The service is currently unavailable."
    cause = from_agy_error({"error": text}, retry_max_wait_s=60)
    assert cause.kind == "unavailable" and cause.transient
    other = from_agy_error({"error": "something else broke"}, retry_max_wait_s=60)
    assert other.kind == "agy_error"

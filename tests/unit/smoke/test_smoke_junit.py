"""Issue 29, problems 7 and 9, and the JUnit acceptance: Jenkins' junit-10.xsd accepts
every report (flaky, reruns, errors, skips, an interrupted run), texts are capped so
lxml's default parser reads a 10 MiB reply, and the suite names host, time and versions.
"""

from __future__ import annotations

import io
from pathlib import Path

from lxml import etree

from agybridge.smoke import github, reports
from agybridge.smoke.causes import Cause
from agybridge.smoke.model import Case, Cell
from agybridge.smoke.progress import Progress
from agybridge.smoke.results import Attempt, CellRecord, CellResult, Failure, TurnRecord

XSD = Path(__file__).resolve().parents[2] / "data" / "junit" / "junit-10.xsd"
SCHEMA = etree.XMLSchema(etree.parse(str(XSD)))
PROPERTIES = {"bridge.version": "0.1.0", "agy.version": "1.3.2"}


def result(name: str, status: str, index: int = 0) -> CellResult:
    rec = CellRecord()
    rec.turns.append(TurnRecord("p", sent_s=0.0, ended_s=1.0, stop_reason="end_turn", text="x"))
    rec.transcript = ["> p", "agent: x"]
    cell = Cell(index, Case(name=name, prompts=("p",)), {"mode": "safe"})
    res = CellResult(cell, status, record=rec)  # type: ignore[arg-type]
    res.started_s, res.ended_s, res.attempts = 0.0, 1.5, 1
    return res


def validated(data: bytes) -> etree._Element:
    """Parsed with lxml's default (non-huge) parser and checked against junit-10.xsd."""
    root = etree.fromstring(data)
    SCHEMA.assertValid(root)
    return root


def flaky_and_reruns() -> list[CellResult]:
    flaky = result("flaky", "flaky", 0)
    flaky.attempts = 2
    flaky.earlier = [Attempt(Cause("unavailable", "503"), [], ["> p", "attempt one"])]
    rerun = result("rerun", "error", 1)
    rerun.attempts = 2
    rerun.error = Cause("rate_limited", "429 again")
    rerun.earlier = [Attempt(Cause("rate_limited", "429"), [], ["> p"])]
    failed = result("failed", "failed", 2)
    failed.failures = [Failure("expect.contains", "text containing 'A'", '"x"')]
    return [flaky, rerun, failed, result("ok", "passed", 3)]


def test_flaky_cells_are_reported_as_surefire_does() -> None:
    """Problem 7: a cell that passed on a retry is flaky, its first error kept."""
    root = validated(reports.junit(flaky_and_reruns(), "m.toml", 3.0, PROPERTIES))
    cases = {tc.get("classname"): tc for tc in root.iter("testcase")}
    flaky = cases["flaky"]
    assert flaky.find("error") is None and flaky.find("failure") is None
    (first,) = flaky.findall("flakyError")
    assert first.get("type") == "unavailable" and first.get("message") == "503"
    assert first.findtext("system-out") == "> p\nattempt one"
    assert "cause: unavailable" in (first.findtext("stackTrace") or "")
    rerun = cases["rerun"]
    assert rerun.find("error") is not None and rerun.find("error").get("type") == "rate_limited"
    assert [e.get("message") for e in rerun.findall("rerunError")] == ["429"]
    suite = root.find("testsuite")
    assert suite is not None
    # Flaky counts as passed (JUnit has no flaky count); the JSON and Markdown say flaky.
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "1")
    assert "⚠️ flaky" in reports.markdown(flaky_and_reruns(), "m.toml", 3.0)
    data = reports.json_report(flaky_and_reruns(), {}, 3.0)
    assert data["counts"]["flaky"] == 1
    assert data["cells"][0]["earlier_attempts"][0]["error"]["cause"] == "unavailable"


def test_the_suite_names_host_time_and_versions() -> None:
    root = validated(reports.junit([result("ok", "passed")], "m.toml", 1.0, PROPERTIES))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("hostname") and suite.get("timestamp")
    found = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert found == PROPERTIES


def test_an_interrupted_run_validates() -> None:
    """What a SIGTERM leaves: finished cells, cut-short and never-run cells skipped."""
    done = result("done", "passed", 0)
    cut = CellResult(
        Cell(1, Case("cut", ("p",)), {}), "skipped", skip_reason="cut short: interrupted by SIGTERM"
    )
    never = CellResult(
        Cell(2, Case("never", ("p",)), {}), "skipped", skip_reason="not run: interrupted by SIGTERM"
    )
    root = validated(reports.junit([done, cut, never], "m.toml", 1.0, PROPERTIES))
    skipped = [s.get("message") for s in root.iter("skipped")]
    assert skipped == ["cut short: interrupted by SIGTERM", "not run: interrupted by SIGTERM"]


def test_a_10_mib_reply_is_capped_with_a_note() -> None:
    """Problem 9: lxml's default parser refuses a text node over 10 MB; the report cuts
    the transcript (head and tail kept, the cut said) and still validates."""
    big = result("big", "failed")
    huge = "y" * (10 * 2**20)
    big.record.transcript = ["> p", "agent: " + huge]
    big.failures = [Failure("expect.contains", "text containing 'z'", huge)]
    data = reports.junit([big], "m.toml", 1.0, PROPERTIES)
    assert len(data) < 400_000
    root = validated(data)
    out = root.findtext("testsuite/testcase/system-out") or ""
    assert out.startswith("> p\nagent: yyy") and out.endswith("yyy")
    assert "characters cut here; the JSON report has them all" in out
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and len(failure.get("message") or "") <= 2000


async def test_progress_lines_say_flaky() -> None:
    out = io.StringIO()
    progress = Progress(out, 1, live=False, verbose=False)
    progress.cell_finished(flaky_and_reruns()[0])
    assert (
        out.getvalue()
        == "FLAKY flaky [mode=safe]  1.50s  (passed on attempt 2 after: unavailable)\n"
    )


def test_github_annotations_escape_and_group() -> None:
    failed = result("bad, really", "failed")
    failed.failures = [Failure("expect.contains", "text containing 'A'", '"50%\nx"')]
    # agy's output could hold a workflow command: the transcript is not obeyed.
    failed.record.transcript = ["> p", "agent: ::error::fake\n::set-env name=X::1"]
    cells = [failed, *flaky_and_reruns()[:1], result("ok", "passed")]
    lines = github.commands(cells, "m.toml", token="T0KEN")
    assert lines[0] == (
        "::error file=m.toml,title=smoke failed%3A bad%2C really [mode=safe]::"
        "expect.contains: expected text containing 'A'; seen \"50%25%0Ax\""
    )
    assert lines[1:8] == [
        "::group::transcript of bad, really [mode=safe]",
        "::stop-commands::T0KEN",
        "> p",
        "agent: ::error::fake",
        "::set-env name=X::1",
        "::T0KEN::",
        "::endgroup::",
    ]
    assert lines[8].startswith("::warning file=m.toml,title=smoke flaky%3A flaky [mode=safe]::")
    assert "passed on attempt 2 after: unavailable" in lines[8]
    assert github.enabled({"GITHUB_ACTIONS": "true"}) and not github.enabled({})
    # Unless given, the token is a fresh random one: agy cannot guess it.
    fresh = github.commands([failed], "m.toml")[2]
    assert fresh.startswith("::stop-commands::") and len(fresh) == len("::stop-commands::") + 32

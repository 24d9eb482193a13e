"""``agybridge smoke run`` end to end against the fake agy: exit codes, reports, hygiene.

Each test runs the installed command line (``python -m agybridge smoke run``) as a CI
job would, with this test's environment marker, then asserts that no process carrying
the marker is left (runner, bridges, fakes and their children all inherit it). JUnit
is parsed with ``xml.etree`` and validated against Jenkins' ``junit-10.xsd``, the JSON
report against ``docs/smoke-report.schema.json``;
concurrency is proven by the run's recorded start/end order, never by timing.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
import trio
from lxml import etree

from agybridge.smoke import main as smoke_main
from agybridge.smoke import schemas

from ..acp_wire import Harness
from ..conftest import REPO

pytestmark = pytest.mark.integration
HARNESS_ENV = {"FAKE_AGY_FRAGMENT_DELAY": "0"}
#: A bound for a whole run, far above what any of these matrices needs.
RUN_LIMIT_S = 90
JUNIT_SCHEMA = etree.XMLSchema(etree.parse(str(REPO / "tests/data/junit/junit-10.xsd")))


@attrs.frozen
class Run:
    code: int
    stdout: str
    stderr: str
    report: dict[str, Any] | None
    junit: ET.Element | None
    markdown: str | None

    def explain(self) -> str:
        return f"exit {self.code}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr[-3000:]}"

    def cells(self) -> dict[str, dict[str, Any]]:
        assert self.report is not None, self.explain()
        return {cell["case"]: cell for cell in self.report["cells"]}

    def testcases(self) -> list[ET.Element]:
        assert self.junit is not None, self.explain()
        return self.junit.findall("testsuite/testcase")


async def smoke(
    harness: Harness, matrix: str, *args: str, scenario: str = "echo", **env: str
) -> Run:
    """Run ``matrix`` through ``agybridge smoke run`` with every report written."""
    tmp = harness.tmp_path
    path = tmp / "matrix.toml"
    path.write_text(textwrap.dedent(matrix))
    out = tmp / "out"
    for stale in ("junit.xml", "report.json", "summary.md"):
        (out / stale).unlink(missing_ok=True)
    argv = [sys.executable, "-m", "agybridge", "smoke", "run", str(path)]
    argv += ["--junit", str(out / "junit.xml"), "--json", str(out / "report.json")]
    argv += ["--markdown", str(out / "summary.md"), *args]
    with trio.fail_after(RUN_LIMIT_S):
        done = await trio.run_process(
            argv,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            env=harness.env(scenario, **env),
            cwd=str(tmp),
        )
    await harness.assert_no_leftovers()

    def read(name: str) -> str | None:
        file = out / name
        return file.read_text() if file.exists() else None

    report, junit = read("report.json"), read("junit.xml")
    if junit is not None:
        JUNIT_SCHEMA.assertValid(etree.fromstring(junit.encode()))
    if report is not None:
        jsonschema.validate(json.loads(report), schemas.load("report"))
    return Run(
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
        json.loads(report) if report else None,
        ET.fromstring(junit) if junit else None,
        read("summary.md"),
    )


TWO_BY_TWO = """\
    [run]
    concurrency = 4
    timeout_s = 60

    [matrix]
    mode = ["safe", "ask"]

    [[case]]
    name = "echo"
    prompt = "Reply with exactly the word PONG."
    expect.contains = "PONG"
    expect.stop_reason = "end_turn"

    [[case]]
    name = "tool"
    prompt = "[fake-agy:tool] run one command"
    permissions = "allow"
    expect.tool_kinds = ["execute"]
    expect.not_contains = "error"
"""


async def test_a_passing_matrix_writes_junit_json_and_markdown(harness: Harness) -> None:
    summary = harness.tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    run = await smoke(harness, TWO_BY_TWO, "-v", "--fake", "echo", GITHUB_STEP_SUMMARY=str(summary))
    assert run.code == 0, run.explain()
    suite = run.junit.find("testsuite") if run.junit is not None else None
    assert suite is not None, run.explain()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "0", "0")
    names = sorted((tc.get("classname"), tc.get("name")) for tc in run.testcases())
    assert names == [
        ("echo", "mode=ask"),
        ("echo", "mode=safe"),
        ("tool", "mode=ask"),
        ("tool", "mode=safe"),
    ]
    for testcase in run.testcases():
        assert testcase.find("failure") is None and testcase.find("error") is None
        assert "> " in (testcase.findtext("system-out") or "")
    assert run.report is not None
    assert run.report["counts"] == {"passed": 4, "flaky": 0, "failed": 0, "error": 0, "skipped": 0}
    for cell in run.report["cells"]:
        assert cell["stop_reason"] == "end_turn" and cell["tokens"] > 0
        assert cell["first_chunk_s"] is not None and cell["attempts"] == 1
    asked = [c["permissions"] for c in run.report["cells"] if c["id"] == "tool [mode=ask]"]
    assert asked == [
        [{"title": "Run echo hello_headless_demo", "kind": "execute", "answer": "allow_once"}]
    ]
    assert run.markdown is not None and "| echo | mode=safe | ✅ pass |" in run.markdown
    assert summary.read_text() == "earlier step\n" + run.markdown
    assert run.stdout.count("PASS ") == 4
    assert "[echo [mode=safe]] > Reply with exactly the word PONG." in run.stdout


async def test_failures_and_errors_are_kept_apart(harness: Harness) -> None:
    run = await smoke(
        harness,
        """\
        [run]
        concurrency = 4
        timeout_s = 60

        [[case]]
        name = "wrong"
        prompt = "Reply PING."
        expect.contains = "PONG"

        [[case]]
        name = "crash"
        prompt = "hi"
        env = { FAKE_AGY_SCENARIO = "crash" }

        [[case]]
        name = "quota"
        prompt = "hi"
        env = { FAKE_AGY_SCENARIO = "quota" }

        [[case]]
        name = "auth"
        prompt = "hi"
        env = { FAKE_AGY_SIGNED_OUT = "1" }
        """,
    )
    assert run.code == 1, run.explain()
    cases = {tc.get("classname"): tc for tc in run.testcases()}
    failure = cases["wrong"].find("failure")
    assert failure is not None and cases["wrong"].find("error") is None
    assert failure.get("message") == "expected text containing 'PONG'; seen \"Reply PING.\""
    for name, cause in (("crash", "agy_crashed"), ("quota", "quota"), ("auth", "not_signed_in")):
        error = cases[name].find("error")
        assert error is not None and cases[name].find("failure") is None, name
        assert error.get("type") == cause, (name, error.attrib)
    crash = cases["crash"].find("error")
    assert crash is not None and "exit code 1" in (crash.get("message") or "")
    cells = run.cells()
    assert cells["quota"]["error"]["transient"] is False  # resets in 100 h: not worth a retry
    assert cells["quota"]["error"]["details"]["resetsIn"] == "100h23m59s"
    assert run.report is not None
    assert run.report["counts"] == {"passed": 0, "flaky": 0, "failed": 1, "error": 3, "skipped": 0}
    assert run.markdown is not None and "error `agy_crashed`" in run.markdown


async def test_a_budget_overrun_cancels_the_cell(harness: Harness) -> None:
    run = await smoke(
        harness,
        """\
        [run]
        concurrency = 2
        timeout_s = 60

        [[case]]
        name = "runaway"
        prompt = "count to a million"
        env = { FAKE_AGY_SCENARIO = "slow", FAKE_AGY_SLOW_SECONDS = "600" }
        budget.max_seconds = 0.5

        [[case]]
        name = "hungry"
        prompts = ["one", "two", "three"]
        budget.max_tokens = 10
        """,
    )
    assert run.code == 1, run.explain()
    cells = run.cells()
    runaway = cells["runaway"]
    assert runaway["status"] == "failed" and runaway["error"] is None
    assert runaway["stop_reason"] == "cancelled"
    assert runaway["budget_exceeded"] == "budget.max_seconds 0.5 s exceeded"
    assert [f["expectation"] for f in runaway["failures"]] == ["budget"]
    # The tokens are known when a turn reports them: no later prompt is sent.
    hungry = cells["hungry"]
    assert [turn["prompt"] for turn in hungry["turns"]] == ["one"], hungry
    assert hungry["budget_exceeded"].startswith("budget.max_tokens 10 exceeded")
    assert hungry["status"] == "failed" and hungry["error"] is None


async def test_a_cell_past_its_timeout_is_an_error(harness: Harness) -> None:
    run = await smoke(
        harness,
        """\
        [run]
        timeout_s = 1

        [[case]]
        name = "stuck"
        prompt = "count"
        env = { FAKE_AGY_SCENARIO = "slow", FAKE_AGY_SLOW_SECONDS = "600" }
        """,
    )
    assert run.code == 1, run.explain()
    (testcase,) = run.testcases()
    error = testcase.find("error")
    assert error is not None and error.get("type") == "timeout"
    assert "run.timeout_s = 1 s" in (error.get("message") or "")


async def test_missing_agy_skips_loudly_or_exits_3(harness: Harness) -> None:
    matrix = TWO_BY_TWO
    skipped = await smoke(harness, matrix, AGY_BIN="/nonexistent/agy")
    assert skipped.code == 0, skipped.explain()
    assert "WARNING: agy not found (/nonexistent/agy): every cell SKIPPED" in skipped.stderr
    suite = skipped.junit.find("testsuite") if skipped.junit is not None else None
    assert suite is not None and suite.get("skipped") == "4"
    assert all(tc.find("skipped") is not None for tc in skipped.testcases())
    assert skipped.markdown is not None and "every cell SKIPPED" in skipped.markdown
    required = await smoke(harness, matrix, "--require-agy", AGY_BIN="/nonexistent/agy")
    assert required.code == 3, required.explain()


@pytest.mark.parametrize(
    ("matrix", "where", "words"),
    [
        (
            '[run]\nconcurrency = 2\n[[case]]\nname = "a"\nprompt = "p"\nexpect.contans = "x"\n',
            ":6: ",
            "unknown key 'case[0].expect.contans'",
        ),
        ('[run]\ntimeout_s = "soon"\n[[case]]\nname = "a"\nprompt = "p"\n', ":2: ", "a number"),
    ],
)
def test_an_invalid_matrix_exits_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], matrix: str, where: str, words: str
) -> None:
    # Rejected before any process starts: the command's main() runs in this process.
    path = tmp_path / "matrix.toml"
    path.write_text(matrix)
    junit = tmp_path / "junit.xml"
    assert smoke_main(["run", str(path), "--junit", str(junit)]) == 2
    stderr = capsys.readouterr().err
    assert f"matrix.toml{where}" in stderr and words in stderr, stderr
    assert not junit.exists()


def test_bad_command_lines_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text('[[case]]\nname = "a"\nprompt = "p"\n')
    assert smoke_main(["run", str(path), "--baseline", str(tmp_path / "nope.json")]) == 2
    assert "cannot read the baseline" in capsys.readouterr().err
    assert smoke_main(["run", str(path), "--update-baseline"]) == 2
    assert "--update-baseline needs --baseline FILE" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        smoke_main(["run", str(path), "--max-slowdown", "0.5"])
    assert exited.value.code == 2
    assert "a growth factor is 1 or more" in capsys.readouterr().err


async def test_a_bridge_that_cannot_start_exits_2(harness: Harness) -> None:
    matrix = '[[case]]\nname = "a"\nprompt = "p"\n'
    run = await smoke(harness, matrix, "--bridge", "/nonexistent/bridge")
    assert run.code == 2, run.explain()
    assert "the bridge cannot start: cannot start the bridge '/nonexistent/bridge'" in run.stderr
    broken = await smoke(harness, matrix, "--bridge", f"{sys.executable} -c 'import sys'")
    assert broken.code == 2, broken.explain()
    assert "did not answer initialize" in broken.stderr


async def test_permission_answers_follow_the_case(harness: Harness) -> None:
    run = await smoke(
        harness,
        """\
        [run]
        concurrency = 3
        timeout_s = 60

        [matrix]
        mode = ["ask"]

        [[case]]
        name = "allow"
        prompt = "[fake-agy:permission-tool]"
        permissions = "allow"
        expect.files = { "fake-agy-permission.txt" = "" }

        [[case]]
        name = "deny"
        prompt = "[fake-agy:permission-tool]"
        permissions = "deny"
        expect.contains = "denied"

        [[case]]
        name = "fail"
        prompt = "[fake-agy:permission-tool]"
        permissions = "fail"
        """,
    )
    assert run.code == 1, run.explain()
    cells = run.cells()
    answers = {name: [p["answer"] for p in cells[name]["permissions"]] for name in cells}
    assert answers == {
        "allow": ["allow_once", "allow_once"],
        "deny": ["reject_once", "reject_once"],
        "fail": ["reject_once", "reject_once"],
    }
    assert cells["allow"]["status"] == "passed" and cells["deny"]["status"] == "passed"
    assert "hello_headless_demo" in cells["allow"]["turns"][0]["text"]
    assert cells["fail"]["status"] == "failed"
    (failure,) = cells["fail"]["failures"]
    assert failure["expectation"] == "permissions"
    assert failure["seen"] == "Run echo hello_headless_demo, Create fake-agy-permission.txt"


async def test_cells_overlap_up_to_the_concurrency(harness: Harness) -> None:
    """Cells a and b can only pass together: each creates a file the other's second
    turn waits for (the fake's ``gate=``), so one at a time would end in a timeout.
    Cell c waits for a free slot: never more than two cells run at once."""
    gate_a, gate_b = harness.tmp_path / "gate-a", harness.tmp_path / "gate-b"
    run = await smoke(
        harness,
        f"""\
        [run]
        concurrency = 2
        timeout_s = 45

        [matrix]
        mode = ["autonomous"]

        [[case]]
        name = "a"
        prompts = ["[fake-agy:edit] {gate_b}", "[fake-agy:big-output] gate={gate_a}"]

        [[case]]
        name = "b"
        prompts = ["[fake-agy:edit] {gate_a}", "[fake-agy:big-output] gate={gate_b}"]

        [[case]]
        name = "c"
        prompt = "after a slot frees"
        """,
    )
    assert run.code == 0, run.explain()
    cells = run.cells()
    a, b, c = cells["a"], cells["b"], cells["c"]
    # Recorded order of starts and ends: a and b were running at the same time...
    assert a["seq_start"] < b["seq_end"] and b["seq_start"] < a["seq_end"]
    # ...and c started only after one of them ended.
    assert c["seq_start"] > min(a["seq_end"], b["seq_end"])
    events = sorted(
        [(cell["seq_start"], +1) for cell in cells.values()]
        + [(cell["seq_end"], -1) for cell in cells.values()]
    )
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak == 2


async def test_a_baseline_regression_fails_the_cell(harness: Harness) -> None:
    matrix = '[run]\ntimeout_s = 60\n[[case]]\nname = "a"\nprompt = "Reply PONG."\n'
    base = harness.tmp_path / "baseline.json"
    first = await smoke(harness, matrix, "--baseline", str(base), "--update-baseline")
    assert first.code == 0, first.explain()
    saved = json.loads(base.read_text())
    assert saved["kind"] == "agybridge-smoke-baseline"
    history = saved["cells"]["a [default]"]
    assert len(history["turn_s"]) == 1 and len(history["tokens"]) == 1
    # Pretend the earlier runs were much faster and leaner (and their first
    # chunk so late that this run's, however slow the machine, is no regression).
    history["turn_s"] = [t / 100 for t in history["turn_s"]]
    history["tokens"] = [1]
    history["first_chunk_s"] = [3600.0]
    base.write_text(json.dumps(saved))
    second = await smoke(
        harness,
        matrix,
        "--baseline",
        str(base),
        "--max-slowdown",
        "2",
        "--slowdown-floor",
        "0",
        "--token-floor",
        "0",
        "--baseline-min-samples",
        "1",
        "--update-baseline",
    )
    assert second.code == 1, second.explain()
    (cell,) = second.report["cells"] if second.report else [None]
    assert cell is not None and cell["status"] == "failed"
    assert [f["expectation"] for f in cell["failures"]] == ["baseline.turn_s", "baseline.tokens"]
    assert cell["baseline"]["tokens"]["ratio"] > 1.5
    # The progress line already says what the report says.
    assert "FAIL  a [default]" in second.stdout and "baseline.turn_s" in second.stdout
    (testcase,) = second.testcases()
    failure = testcase.find("failure")
    assert failure is not None and failure.get("type") == "baseline.turn_s"
    assert second.markdown is not None and "(+" in second.markdown
    # A failed run does not become part of the baseline.
    assert json.loads(base.read_text()) == saved
    assert "is NOT updated" in second.stderr


async def test_transient_errors_are_retried(harness: Harness) -> None:
    """The first cell attempt meets a 503 on its second turn; the retry runs clean."""
    count = harness.tmp_path / "spawns"
    wrapper = harness.tmp_path / "bridge.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo x >> "{count}"\n'
        f'if [ "$(wc -l < "{count}")" -eq 1 ]; then export FAKE_AGY_SCENARIO=echo,unavailable; fi\n'
        f"exec {shlex.quote(sys.executable)} -m agybridge\n"
    )
    wrapper.chmod(0o755)
    run = await smoke(
        harness,
        """\
        [run]
        timeout_s = 60
        retries = 2
        retry_max_wait_s = 0.1

        [[case]]
        name = "flaky"
        prompts = ["one", "two"]
        expect.contains = "two"
        """,
        "--bridge",
        str(wrapper),
    )
    assert run.code == 0, run.explain()
    cell = run.cells()["flaky"]
    # Passed on a retry: flaky, with the first attempt's error kept.
    assert cell["attempts"] == 2 and cell["status"] == "flaky"
    assert [a["error"]["cause"] for a in cell["earlier_attempts"]] == ["unavailable"]
    assert "RETRY flaky [default] in 0.1s  (unavailable:" in run.stdout
    assert "FLAKY flaky [default]" in run.stdout
    assert count.read_text().count("x") == 2
    (testcase,) = run.testcases()
    flaky = testcase.find("flakyError")
    assert flaky is not None and flaky.get("type") == "unavailable"
    assert testcase.find("error") is None and testcase.find("failure") is None
    assert "> one" in (flaky.findtext("system-out") or "")
    assert run.markdown is not None and "⚠️ flaky" in run.markdown


@pytest.mark.parametrize("example", ["basic", "live"])
async def test_the_examples_pass_against_the_fake(harness: Harness, example: str) -> None:
    """basic.toml, and live.toml with its cells for agy-acp-map's S1-S6 (an image in the
    reply, a respawn with --conversation, sandbox, an empty prompt, set_config_option,
    session/list), each picking the fake's stand-in for the model with its env."""
    examples = REPO / "examples" / "smoke"
    text = (examples / f"{example}.toml").read_text()
    text = re.sub(r"concurrency = \d+", "concurrency = 8", text)
    text = text.replace('"fixtures/app"', json.dumps(str(examples / "fixtures" / "app")))
    run = await smoke(harness, text, "--fake", "echo")
    assert run.code == 0, run.explain()
    if example == "live":
        assert run.report is not None
        passed = {c["case"] for c in run.report["cells"] if c["status"] == "passed"}
        assert {"image-out", "respawn-conversation", "sandbox", "empty-prompt"} <= passed
        assert {"set-config-option", "session-list", "memory", "tool"} <= passed


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_stops_every_bridge_and_still_reports(
    harness: Harness, sig: signal.Signals
) -> None:
    """SIGINT (Ctrl-C) or SIGTERM (a cancelled CI job) while two cells are mid-turn (one
    agy deaf to SIGINT) and a third waits: the reports are written (the cells that did
    not finish are skipped, saying why), the temp dir is gone, nothing is left running,
    exit 130 / 143."""
    path = harness.tmp_path / "matrix.toml"
    path.write_text(
        textwrap.dedent(
            """\
            [run]
            concurrency = 2
            [[case]]
            name = "slow"
            prompt = "count"
            env = { FAKE_AGY_SCENARIO = "slow", FAKE_AGY_SLOW_SECONDS = "600" }
            [[case]]
            name = "deaf"
            prompt = "count"
            env = { FAKE_AGY_SCENARIO = "ignore-sigint", FAKE_AGY_SLOW_SECONDS = "600" }
            [[case]]
            name = "waiting"
            prompt = "never sent"
            """
        )
    )
    temp = harness.tmp_path / "temp"
    temp.mkdir()
    out = harness.tmp_path / "out"
    argv = [sys.executable, "-m", "agybridge", "smoke", "run", str(path), "-v", "--plain"]
    argv += ["--json", str(out / "r.json"), "--junit", str(out / "r.xml")]
    process = await trio.lowlevel.open_process(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # The deaf agy costs the bridge its SIGINT grace: keep it short.
        env=harness.env("echo", AGYBRIDGE_SIGINT_GRACE_S="0.3", TMPDIR=str(temp)),
        cwd=str(harness.tmp_path),
    )
    assert process.stdout is not None and process.stderr is not None
    seen = b""
    try:
        with trio.fail_after(RUN_LIMIT_S):
            # Both prompts are on their way to agy (a turn's text shows only at its end).
            while not (b"[slow [default]] > count" in seen and b"[deaf [default]] > count" in seen):
                chunk = await process.stdout.receive_some()
                assert chunk, f"the runner ended early:\n{seen.decode()}"
                seen += chunk
            process.send_signal(sig)
            stderr = b""
            async for chunk in process.stderr:
                stderr += chunk
            await process.wait()
    finally:
        with trio.CancelScope(shield=True):
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 128 + sig.value, stderr.decode()
    assert f"{sig.name}: stopping every bridge".encode() in stderr
    await harness.assert_no_leftovers()
    assert list(temp.iterdir()) == []
    report = json.loads((out / "r.json").read_text())
    reasons = {c["case"]: (c["status"], c["skip_reason"]) for c in report["cells"]}
    assert reasons == {
        "slow": ("skipped", f"cut short: interrupted by {sig.name}"),
        "deaf": ("skipped", f"cut short: interrupted by {sig.name}"),
        "waiting": ("skipped", f"not run: interrupted by {sig.name}"),
    }
    assert report["note"] == f"interrupted by {sig.name}"
    junit = ET.fromstring((out / "r.xml").read_bytes())
    assert junit.find("testsuite") is not None
    assert len(junit.findall("testsuite/testcase/skipped")) == 3


async def test_a_report_that_cannot_be_written_is_a_message(harness: Harness) -> None:
    """--json naming a directory: the other reports are still written, the run says which
    file it could not write and exits 2 (the command line is wrong), not a traceback."""
    blocked = harness.tmp_path / "a-directory"
    blocked.mkdir()
    matrix = '[[case]]\nname = "echo"\nprompt = "Reply with PONG."\n'
    run = await smoke(harness, matrix, "--fake", "echo", "--json", str(blocked))
    assert run.code == 2, run.explain()
    assert "Traceback" not in run.stderr and f"cannot write {blocked}" in run.stderr
    assert run.junit is not None and run.markdown is not None


async def test_an_agy_that_does_not_run_exits_3_with_require_agy(harness: Harness) -> None:
    """An agy that is there but fails at once is found only by the bridge
    (``agy_fails`` on the wire): ``--require-agy`` exits 3 for it too."""
    broken = harness.tmp_path / "agy-broken"
    broken.write_text("#!/bin/sh\necho 'agy: installation is corrupt' >&2\nexit 1\n")
    broken.chmod(0o755)
    matrix = '[run]\ntimeout_s = 60\n[[case]]\nname = "a"\nprompt = "hi"\n'
    run = await smoke(harness, matrix, "--require-agy", AGY_BIN=str(broken))
    assert run.code == 3, run.explain()
    (testcase,) = run.testcases()
    error = testcase.find("error")
    assert error is not None and error.get("type") == "agy_fails", run.explain()
    assert "installation is corrupt" in (error.get("message") or "")

"""``agybridge smoke run`` end to end, issue 29: causes a CI job can trust, baselines
that cannot switch off silently, and pytest's selection habits (-k, --list, -x, --lf,
--repeat, GitHub annotations). Every JUnit file is validated against junit-10.xsd by
the shared `smoke` helper."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from agybridge import causes as catalogue
from agybridge.smoke import main as smoke_main

from ..acp_wire import Harness
from .test_smoke_run import smoke

pytestmark = pytest.mark.integration


async def test_errors_that_used_to_pass_are_errors_with_their_cause(harness: Harness) -> None:
    """Problems 1 and 5 on the wire: print timeout, failed tool, 503 at start-up
    (retried), a bad model, an AGY_BIN that is not executable or not a program, a stall;
    and issue 26: every cause under the bridge's catalogue id, exactly the transient
    ones retried (interrupted, start-up timeout: yes; a quota that resets in 100 h, a
    signal death, garbage: no)."""
    text = harness.tmp_path / "agy.txt"
    text.write_text("not a program\n")
    text.chmod(0o644)
    garbage = harness.tmp_path / "agy-garbage"
    garbage.write_bytes(b"\x00\x01 not a program\n")
    garbage.chmod(0o755)
    run = await smoke(
        harness,
        """\
        [run]
        concurrency = 3
        timeout_s = 60
        retries = 1
        retry_max_wait_s = 0.1

        [[case]]
        name = "print-timeout"
        prompt = "[fake-agy:print-timeout] hi"
        expect.stop_reason = "end_turn"

        [[case]]
        name = "tool-error"
        prompt = "[fake-agy:tool-error] hi"
        expect.tool_kinds = ["execute"]

        [[case]]
        name = "startup-503"
        prompt = "hi"
        env = { FAKE_AGY_SCENARIO = "unavailable" }

        [[case]]
        name = "bad-model"
        prompt = "hi"
        env = { AGYBRIDGE_MODEL = "nonesuch" }

        [[case]]
        name = "bad-agy"
        prompt = "hi"
        env = { AGY_BIN = "AGY_TEXT" }

        [[case]]
        name = "garbage-agy"
        prompt = "hi"
        env = { AGY_BIN = "AGY_GARBAGE" }

        [[case]]
        name = "interrupted"
        prompt = "[fake-agy:interrupted] hi"

        [[case]]
        name = "quota-words"
        prompt = "[fake-agy:quota-words] hi"

        [[case]]
        name = "killed"
        prompt = "[fake-agy:killed] hi"

        [[case]]
        name = "startup-hang"
        prompt = "hi"
        env = { FAKE_AGY_STARTUP_HANG = "silent", AGYBRIDGE_STARTUP_TIMEOUT_S = "1" }

        [[case]]
        name = "startup-garbage"
        prompt = "hi"
        env = { FAKE_AGY_STARTUP_HANG = "garbage", AGYBRIDGE_STARTUP_TIMEOUT_S = "1" }

        [[case]]
        name = "stall"
        prompt = "[fake-agy:slow] hi"
        [case.env]
        AGYBRIDGE_STALL_TIMEOUT_S = "1"
        FAKE_AGY_SLOW_SECONDS = "5"
        FAKE_AGY_SLOW_INTERVAL = "3"
        """.replace("AGY_TEXT", str(text)).replace("AGY_GARBAGE", str(garbage)),
    )
    assert run.code == 1, run.explain()
    cells = run.cells()
    found = {
        name: (cell["status"], (cell["error"] or {}).get("cause"), cell["attempts"])
        for name, cell in cells.items()
    }
    assert found == {
        "print-timeout": ("error", "print_timeout", 1),
        "tool-error": ("failed", None, 1),
        "startup-503": ("error", "unavailable", 2),
        "bad-model": ("error", "invalid_model", 1),
        "bad-agy": ("error", "agy_not_executable", 1),
        "garbage-agy": ("error", "agy_fails", 1),
        "stall": ("error", "stall_timeout", 1),
        "interrupted": ("error", "interrupted", 2),
        "quota-words": ("error", "quota", 1),
        "killed": ("error", "agy_crashed", 1),
        "startup-hang": ("error", "agy_start_timeout", 2),
        "startup-garbage": ("error", "agy_garbage", 1),
    }, run.explain()
    for name, (_, cause, attempts) in found.items():
        if cause is None:
            continue
        # Retried exactly when the catalogue says transient, but never to wait
        # for a quota that resets later than run.retry_max_wait_s.
        transient = catalogue.cause(cause).transient and name != "quota-words"
        assert cells[name]["error"]["transient"] is transient, name
        assert (attempts == 2) is transient, name
    assert cells["print-timeout"]["outcome"] == "print_timeout"
    assert cells["print-timeout"]["stop_reason"] == "end_turn"  # what the wire said
    assert cells["tool-error"]["failures"][0]["seen"].endswith("(failed)")
    assert f"AGY_BIN={text} is not executable" in cells["bad-agy"]["error"]["message"]
    assert "Exec format error" in cells["garbage-agy"]["error"]["message"]
    errors = {tc.get("classname"): tc.find("error") for tc in run.testcases()}
    assert errors["print-timeout"] is not None
    assert errors["print-timeout"].get("type") == "print_timeout"


async def test_a_baseline_survives_reordered_axes_and_is_never_switched_off(
    harness: Harness,
) -> None:
    """Problem 3: swapped axes still compare every cell; agy missing is exit 2 (3 with
    --require-agy) against a baseline, and the baseline is not overwritten."""
    ordered = (
        '[run]\nconcurrency = 4\ntimeout_s = 60\n[matrix]\nmode = ["safe", "ask"]\n'
        'effort = ["low", "high"]\n[[case]]\nname = "a"\nprompt = "Reply PONG."\n'
    )
    swapped = ordered.replace(
        'mode = ["safe", "ask"]\neffort = ["low", "high"]',
        'effort = ["low", "high"]\nmode = ["safe", "ask"]',
    )
    assert swapped != ordered
    base = harness.tmp_path / "baseline.json"
    first = await smoke(harness, ordered, "--baseline", str(base), "--update-baseline")
    assert first.code == 0, first.explain()
    saved = base.read_text()
    second = await smoke(harness, swapped, "--baseline", str(base))
    assert second.code == 0, second.explain()
    compared = [c for c in (second.report or {})["cells"] if c["baseline"]]
    assert len(compared) == 4
    without = await smoke(
        harness, ordered, "--baseline", str(base), "--update-baseline", AGY_BIN="/nonexistent"
    )
    assert without.code == 2, without.explain()
    assert "BASELINE NOT TRUSTED: compared 0 of the 4 cells" in without.stderr
    assert without.markdown is not None and "baseline not trusted: compared 0" in without.markdown
    assert "is NOT updated" in without.stderr
    required = await smoke(
        harness,
        ordered,
        "--baseline",
        str(base),
        "--update-baseline",
        "--require-agy",
        AGY_BIN="/nonexistent",
    )
    assert required.code == 3, required.explain()
    assert base.read_text() == saved


async def test_selection_habits(harness: Harness) -> None:
    """-k and --list, -x, --lf, --repeat and GitHub annotations."""
    matrix = """\
        [run]
        timeout_s = 60

        [matrix]
        mode = ["safe", "ask"]

        [[case]]
        name = "good"
        prompt = "Reply with PONG."
        expect.contains = "PONG"

        [[case]]
        name = "bad"
        prompt = "Reply with PING."
        expect.contains = "PONG"

        [[case]]
        name = "later"
        prompt = "Reply with PONG."
        """
    listed = await smoke(harness, matrix, "--list", "-k", "good or (bad and safe)")
    assert listed.code == 0, listed.explain()
    assert listed.stdout.splitlines() == [
        "good [mode=safe]",
        "good [mode=ask]",
        "bad [mode=safe]",
        "3 cells selected",
    ]
    first = await smoke(harness, matrix, "-x", GITHUB_ACTIONS="true")
    assert first.code == 1, first.explain()
    statuses = {c["id"]: (c["status"], c["skip_reason"]) for c in first.report["cells"]}  # type: ignore[index]
    assert statuses["bad [mode=safe]"] == ("failed", None)
    assert statuses["later [mode=ask]"] == (
        "skipped",
        "not run: -x stopped the run after bad [mode=safe] failed",
    )
    assert "::error file=" in first.stdout
    assert "title=smoke failed%3A bad [mode=safe]" in first.stdout
    assert "::group::transcript of bad [mode=safe]" in first.stdout
    again = await smoke(harness, matrix, "--lf", "--repeat", "2")
    assert again.code == 1, again.explain()
    assert [c["id"] for c in again.report["cells"]] == [  # type: ignore[index]
        "bad [mode=safe] #1",
        "bad [mode=safe] #2",
    ]


def test_a_bad_k_or_an_empty_selection_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text('[[case]]\nname = "a"\nprompt = "p"\n')
    assert smoke_main(["run", str(path), "-k", "a and"]) == 2
    assert "-k 'a and': the expression ends too early" in capsys.readouterr().err
    assert smoke_main(["run", str(path), "-k", "zzz"]) == 2
    assert "no cell is selected" in capsys.readouterr().err
    bad_mode = '[matrix]\nmode = ["yolo"]\n[[case]]\nname = "a"\nprompt = "p"\n'
    (tmp_path / "m2.toml").write_text(bad_mode)
    assert smoke_main(["run", str(tmp_path / "m2.toml")]) == 2
    assert "'yolo' is not a valid mode" in capsys.readouterr().err


async def test_reruns_report_a_flaky_failure(harness: Harness) -> None:
    """--reruns: a cell whose expectation failed once and then held is flaky, its first
    failure kept as Surefire's <flakyFailure> (with that attempt's transcript)."""
    count = harness.tmp_path / "spawns"
    wrapper = harness.tmp_path / "bridge.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo x >> "{count}"\n'
        f'if [ "$(wc -l < "{count}")" -eq 1 ]; then export FAKE_AGY_SCENARIO=tool-error; fi\n'
        f"exec {shlex.quote(sys.executable)} -m agybridge\n"
    )
    wrapper.chmod(0o755)
    matrix = '[run]\ntimeout_s = 60\n[[case]]\nname = "a"\nprompt = "Reply with PONG."\n'
    matrix += 'expect.contains = "PONG"\n'
    run = await smoke(harness, matrix, "--bridge", str(wrapper), "--reruns", "1")
    assert run.code == 0, run.explain()
    cell = run.cells()["a"]
    assert (cell["status"], cell["attempts"]) == ("flaky", 2)
    (earlier,) = cell["earlier_attempts"]
    assert earlier["error"] is None
    assert earlier["failures"][0]["expectation"] == "expect.contains"
    (testcase,) = run.testcases()
    flaky = testcase.find("flakyFailure")
    assert flaky is not None and flaky.get("type") == "expect.contains"
    assert "permission denied" in (flaky.findtext("system-out") or "")
    assert testcase.find("failure") is None
    assert "RETRY a [default] in 0.0s  (expect.contains:" in run.stdout

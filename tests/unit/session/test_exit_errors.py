"""What a turn fails with when agy exits (issue 26): the cause agy named on
stderr first, else a crash by its exit code or its signal's name; agy's
``AGY_ERROR`` JSON is parsed into ``_meta``, never pasted into the message."""

from __future__ import annotations

from agybridge.agy import ChildExited
from agybridge.session import errors

QUOTA = "Individual quota reached. Resets in 100h23m59s."


def exited(code: int | None, *stderr: str) -> ChildExited:
    return ChildExited(1, code, killed=False, stderr_tail=tuple(stderr))


def test_a_signal_death_is_named_by_the_signal() -> None:
    error = errors.exit_error(exited(-11))
    assert error.cause == "agy_crashed"
    assert "killed by SIGSEGV" in error.message and "-11" not in error.message
    assert error.meta()["agybridge"] == {"cause": "agy_crashed", "signal": "SIGSEGV"}


def test_a_quota_in_words_only_is_quota_not_a_crash() -> None:
    error = errors.exit_error(exited(1, f"error: {QUOTA}"))
    assert error.cause == "quota"
    assert "quota resets at" in error.message and "Wait for the reset" in error.message
    assert error.meta()["agybridge"]["resetsIn"] == "100h23m59s"


def test_agy_error_json_goes_to_meta_not_to_the_message() -> None:
    line = (
        'AGY_ERROR: {"short_error":"INVALID_ARGUMENT (code 400): API key not valid",'
        '"error_code":400}'
    )
    error = errors.exit_error(exited(3, "error: API key not valid", line))
    assert error.cause == "agy_crashed" and "AGY_ERROR" not in error.message
    assert "API key not valid" in error.message
    assert error.meta()["agybridge"]["agyError"]["errorCode"] == 400
    unavailable = line.replace("INVALID_ARGUMENT (code 400)", "UNAVAILABLE (code 503)")
    down = errors.exit_error(exited(3, "error: down", unavailable.replace("400", "503")))
    assert down.cause == "unavailable" and "AGY_ERROR" not in down.message

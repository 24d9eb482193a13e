"""``agybridge stop``'s arguments, checked before the daemon is asked."""

from __future__ import annotations

from typing import Any

import pytest

from agybridge.attach import control


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_stop_refuses_a_timeout_that_is_not_a_number_of_seconds(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--timeout nan / inf (which JSON cannot carry: the daemon would answer a
    parse error and stop would wait for nothing) is a usage error, like -1."""
    asked: list[Any] = []
    monkeypatch.setattr(control, "call", lambda *args, **kwargs: asked.append(args))
    with pytest.raises(SystemExit) as exited:
        control.stop_main(["--timeout", value])
    assert exited.value.code == 2
    assert "--timeout" in capsys.readouterr().err
    assert asked == []


def test_daemon_help_says_what_it_does_and_its_exit_statuses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from agybridge import cli  # noqa: PLC0415  # the full CLI, for its parser

    with pytest.raises(SystemExit) as exited:
        cli.main(["daemon", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "workstation supervisor" in text and "agybridge attach" in text, text
    assert "AGYBRIDGE_SOCKET" in text and "3 another daemon has the socket" in text, text

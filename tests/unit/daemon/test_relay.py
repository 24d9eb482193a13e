"""``attach``'s relay against a stand-in daemon (a socket pair): a connection
closed before its first answer is made again with what was sent on it, and a
daemon that goes away leaves no relayed request unanswered."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import trio

from agybridge.attach import relay as relay_module
from agybridge.attach import start as start_module
from agybridge.attach.relay import INTERNAL_ERROR, Relay
from agybridge.attach.start import AttachError, connect
from agybridge.attach.trust import UntrustedError


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _request(request_id: int | str, method: str) -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "method": method, "params": {}})


def _read_lines(sock: socket.socket, count: int) -> list[bytes]:
    data = b""
    while data.count(b"\n") < count:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return data.splitlines(keepends=True)


def _answers(fd: int) -> list[dict[str, Any]]:
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    return [json.loads(line) for line in data.splitlines()]


def _no_reconnect() -> socket.socket:
    raise AssertionError("connected again after an answer")


async def test_a_connection_closed_before_its_first_answer_is_made_again() -> None:
    """The daemon accepted, read, and went away without a byte (an idle daemon
    exiting): attach connects again and sends the same bytes; the editor sees
    one answer and attach exits as usual."""
    pairs = [socket.socketpair() for _ in range(2)]
    connections: Iterator[socket.socket] = iter([pairs[1][0]])
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    relay = Relay(pairs[0][0], in_r, out_w, lambda: next(connections))
    sent = _request(1, "initialize")
    os.write(in_w, sent)
    os.close(in_w)  # the editor is done writing; it still reads
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, relay.run)
        first = pairs[0][1]
        assert await trio.to_thread.run_sync(_read_lines, first, 1) == [sent]
        first.close()  # no answer
        second = pairs[1][1]
        assert await trio.to_thread.run_sync(_read_lines, second, 1) == [sent]
        second.sendall(_line({"jsonrpc": "2.0", "id": 1, "result": {}}))
        second.close()
    relay.close()
    os.close(out_w)
    assert _answers(out_r) == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert (relay.unanswered_at_close, relay.daemon_closed_first) == (0, False)


async def test_a_daemon_that_dies_leaves_no_relayed_request_unanswered() -> None:
    """It answered the first request and died mid-way through a line: the cut
    line ends, each request it did not answer gets an error naming the cause,
    and attach reports it (exit status 1 in main)."""
    ours, daemon = socket.socketpair()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    relay = Relay(ours, in_r, out_w, _no_reconnect)  # it answered: not connected again
    requests = [
        _request(1, "initialize"),
        _request(2, "session/new"),
        _request("p", "session/prompt"),
    ]
    os.write(in_w, b"".join(requests))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, relay.run)
        assert await trio.to_thread.run_sync(_read_lines, daemon, 3) == requests
        daemon.sendall(_line({"jsonrpc": "2.0", "id": 1, "result": {}}) + b'{"jsonrpc": "2.0", "me')
        daemon.close()  # killed
    relay.close()
    os.close(in_w)
    os.close(out_w)
    data = b""
    while chunk := os.read(out_r, 65536):
        data += chunk
    lines = data.splitlines()
    assert json.loads(lines[0]) == {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert lines[1] == b'{"jsonrpc": "2.0", "me'  # the cut line, ended: the rest parses
    errors = [json.loads(line) for line in lines[2:]]
    assert [e["id"] for e in errors] == [2, "p"]
    for error in errors:
        assert error["error"]["code"] == INTERNAL_ERROR
        assert "daemon closed the connection before answering" in error["error"]["message"]
    assert (relay.unanswered_at_close, relay.daemon_closed_first) == (2, True)
    assert "closed the connection" in relay.ending("/run/agybridge.sock")


async def test_after_stdin_ends_a_running_prompts_answer_is_not_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The editor sent a prompt and closed stdin: once everything else is
    answered attach ends, though the daemon keeps the connection open for the
    prompt (its turn goes on there); it used to linger for EOF_DRAIN_S."""
    monkeypatch.setattr(relay_module, "EOF_DRAIN_S", 3600.0)  # would hang the test if waited
    ours, daemon = socket.socketpair()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    relay = Relay(ours, in_r, out_w, _no_reconnect)
    requests = [_request(1, "session/list"), _request(2, "session/prompt")]
    os.write(in_w, b"".join(requests))
    os.close(in_w)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio.to_thread.run_sync, relay.run)
            assert await trio.to_thread.run_sync(_read_lines, daemon, 2) == requests
            daemon.sendall(_line({"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}}))
    relay.close()
    daemon.close()
    os.close(out_w)
    assert _answers(out_r) == [{"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}}]
    assert (relay.unanswered_at_close, relay.daemon_closed_first) == (0, False)


def test_a_socket_path_too_long_is_a_sentence() -> None:
    path = "/tmp/" + "x" * 120 + "/agybridge.sock"
    with pytest.raises(UntrustedError) as caught:
        connect(path)
    message = str(caught.value)
    assert "too long for a Unix socket" in message and "AGYBRIDGE_SOCKET" in message, message


def test_a_daemon_attach_starts_stops_idle_agy_unless_told_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AGYBRIDGE_IDLE_TIMEOUT_S", raising=False)
    assert start_module.started_daemon_defaults() == {"AGYBRIDGE_IDLE_TIMEOUT_S": "1800"}
    monkeypatch.setenv("AGYBRIDGE_IDLE_TIMEOUT_S", "0")
    assert start_module.started_daemon_defaults() == {}


async def test_when_no_new_daemon_answers_the_request_gets_an_error_saying_why() -> None:
    """Closed before its first answer, and connecting again fails: the editor's
    request is answered with an error that says so (not left unanswered)."""
    ours, daemon = socket.socketpair()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()

    def no_daemon() -> socket.socket:
        raise AttachError("the daemon exited during start-up")

    relay = Relay(ours, in_r, out_w, no_daemon)
    os.write(in_w, _request(1, "initialize"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.to_thread.run_sync, relay.run)
        await trio.to_thread.run_sync(_read_lines, daemon, 1)
        daemon.close()
    relay.close()
    os.close(in_w)
    os.close(out_w)
    (error,) = _answers(out_r)
    assert error["id"] == 1 and error["error"]["code"] == INTERNAL_ERROR, error
    assert "no new daemon answers: the daemon exited during start-up" in error["error"]["message"]
    assert relay.unanswered_at_close == 1 and relay.daemon_closed_first
    assert "connecting again failed" in relay.ending("/run/agybridge.sock")

"""What the daemon's output to a client can tell about it without writing to it."""

from __future__ import annotations

import socket
import sys

import pytest
import trio

from agybridge.daemon.output import ClientOutput


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POLLHUP is read on Linux only")
def test_a_half_closed_client_is_there_and_a_closed_one_is_gone() -> None:
    """``attach`` closes its sending side at stdin EOF and still reads its
    answers: not gone; a client that closed its socket is."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with trio.socket.from_stdlib_socket(ours) as sock:
        output = ClientOutput(sock)
        assert not output.hung_up()
        theirs.shutdown(socket.SHUT_WR)
        assert not output.hung_up()
        theirs.close()
        assert output.hung_up()

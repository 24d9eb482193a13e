"""What a daemon connection can tell about its client without writing to it."""

from __future__ import annotations

import socket
import sys

import pytest

from agybridge.daemon.connection import _hung_up


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POLLHUP is read on Linux only")
def test_a_half_closed_client_is_there_and_a_closed_one_is_gone() -> None:
    """``attach`` closes its sending side at stdin EOF and still reads its
    answers: not gone; a client that closed its socket is."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with ours:
        assert not _hung_up(ours)
        theirs.shutdown(socket.SHUT_WR)
        assert not _hung_up(ours)
        theirs.close()
        assert _hung_up(ours)

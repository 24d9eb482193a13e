"""Pipes with fewer trips through trio's scheduler: a read that yields once,
and a write made at once by its sender when the pipe's writer is idle.

trio's ``FdStream.receive_some`` checkpoints first, then tries ``read(2)``, and
only when that finds nothing (``EAGAIN``, raised and caught) waits for the fd.
A line reader that has just handled a read therefore yields twice and makes
one empty system call before each read, on agy's stdout and the client's
stdin, where lines often arrive one at a time. Waiting for readability first
and then reading gives the same result with one yield, which is also the
checkpoint (cancellation and fairness are unchanged: every read still waits
once).
"""

from __future__ import annotations

import errno
import os
import weakref
from collections.abc import Callable
from typing import TypeVar

import trio

T = TypeVar("T")

#: What one read asks for (trio's own default).
RECEIVE_BYTES = 65536
#: Streams epoll refuses (EPERM): regular files, /dev/null.
_NOT_POLLABLE: weakref.WeakSet[trio.lowlevel.FdStream] = weakref.WeakSet()


async def receive_ready(
    stream: trio.abc.ReceiveStream, max_bytes: int = RECEIVE_BYTES
) -> bytes | bytearray:
    """``stream.receive_some(max_bytes)``, with one yield on a trio ``FdStream``.

    Raises:
        trio.ClosedResourceError: the stream was closed (before or while waiting).
        trio.BrokenResourceError: the read failed.
    """
    if type(stream) is not trio.lowlevel.FdStream or stream in _NOT_POLLABLE:
        return await stream.receive_some(max_bytes)
    fd = stream.fileno()
    if fd < 0:
        raise trio.ClosedResourceError("the stream was closed")
    try:
        await trio.lowlevel.wait_readable(fd)  # a closing stream wakes it: ClosedResourceError
    except PermissionError:
        # Not pollable (stdin redirected from a regular file, /dev/null): its
        # reads never wait, so trio's own read serves it from now on.
        _NOT_POLLABLE.add(stream)
        return await stream.receive_some(max_bytes)
    try:
        return os.read(fd, max_bytes)
    except BlockingIOError:
        # Readiness without data (another reader, or a spurious wake-up): the slow path.
        return await stream.receive_some(max_bytes)
    except OSError as exc:
        if exc.errno == errno.EBADF:
            raise trio.ClosedResourceError("the stream was closed") from exc
        raise trio.BrokenResourceError(str(exc)) from exc


def write_nowait(stream: trio.lowlevel.FdStream, data: bytes | memoryview) -> int:
    """Write what the pipe takes without waiting (its fd is non-blocking: trio
    set it so); how many bytes that was, 0 if none. The caller must own the
    writing (no ``send_all`` of the stream may be under way).

    Raises:
        trio.ClosedResourceError: the stream was closed.
        trio.BrokenResourceError: the reader is gone (or another write error).
    """
    try:
        return os.write(stream.fileno(), data)
    except BlockingIOError:
        return 0
    except (BrokenPipeError, ConnectionResetError) as exc:
        raise trio.BrokenResourceError(str(exc)) from exc
    except OSError as exc:
        if exc.errno == errno.EBADF:
            raise trio.ClosedResourceError("the stream was closed") from exc
        raise trio.BrokenResourceError(str(exc)) from exc


async def next_for_writer(
    receive: trio.MemoryReceiveChannel[T], parked: Callable[[bool], None]
) -> T:
    """A pipe writer's next item. ``parked(True)`` only while it waits with
    nothing queued (then a sender may write itself, without a task switch),
    ``parked(False)`` once it has an item (a sender that hands one over clears
    it too: the writer is no longer idle though it has not run yet).

    Raises:
        trio.EndOfChannel: the senders are gone.
    """
    try:
        # Not `receive`, which yields holding an item taken at once: a line
        # written meanwhile by a sender would pass it.
        return receive.receive_nowait()
    except trio.WouldBlock:
        pass
    parked(True)
    try:
        return await receive.receive()
    finally:
        parked(False)

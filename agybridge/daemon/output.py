"""The daemon's writing side of one client's socket.

It writes as trio's ``SocketStream`` does (try at once, wait until the
socket is writable when it is full), and also knows since when the client
has taken nothing (`stuck_since`): the daemon detaches a client that stops
reading for longer than its bound (issue 28), so a frozen editor — a link
that hangs without closing — stalls no turn. Only a full socket costs a
wake-up of the watcher (`wait_changed`); a client that reads costs nothing.
"""

from __future__ import annotations

import os
import select
import sys

import trio


class ClientOutput(trio.abc.SendStream):
    """A ``SendStream`` over a connected trio socket (which its owner closes)."""

    def __init__(self, sock: trio.socket.SocketType) -> None:
        self._sock = sock
        #: When the client last stopped taking bytes; None while it takes them.
        self.stuck_since: float | None = None
        self._changed = trio.Event()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await trio.lowlevel.checkpoint_if_cancelled()
        waited = False
        with memoryview(data) as view:
            done = 0
            try:
                while done < len(view):
                    try:
                        done += os.write(self._sock.fileno(), view[done:])
                    except BlockingIOError:
                        if self.stuck_since is None:
                            self._note(trio.current_time())
                        waited = True
                        await trio.lowlevel.wait_writable(self._sock)
                        continue
                    if self.stuck_since is not None:
                        self._note(None)  # it reads again, however slowly
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise trio.BrokenResourceError(f"the client went away: {exc}") from exc
            except OSError as exc:  # EBADF: closed meanwhile
                raise trio.ClosedResourceError(f"the connection is closed: {exc}") from exc
            finally:
                if self.stuck_since is not None:
                    self._note(None)
        if not waited:
            await trio.lowlevel.cancel_shielded_checkpoint()

    async def wait_send_all_might_not_block(self) -> None:
        await trio.lowlevel.wait_writable(self._sock)

    async def aclose(self) -> None:
        self._sock.close()
        await trio.lowlevel.checkpoint()

    def hung_up(self) -> bool:
        """The other end closed both directions (Linux reports POLLHUP for a
        Unix socket only then, not for a half-close; elsewhere: never said)."""
        if not sys.platform.startswith("linux"):
            return False
        poller = select.poll()
        try:
            poller.register(self._sock.fileno(), select.POLLIN)
            events = poller.poll(0)
        except (OSError, ValueError):  # closed meanwhile: gone
            return True
        return any(mask & select.POLLHUP for _fd, mask in events)

    async def wait_changed(self) -> None:
        """Return once `stuck_since` changed (or `poke` was called)."""
        await self._changed.wait()

    def poke(self) -> None:
        """Wake `wait_changed` (the bound changed: shutdown)."""
        self._changed.set()
        self._changed = trio.Event()

    def _note(self, since: float | None) -> None:
        self.stuck_since = since
        self.poke()

"""The broker: a trio server on the session's Unix socket that answers hook helpers.

Theory of operation. Each hook helper connects, sends one line ``{"token", "payload"}``
(hook.py) and waits for one decision line. Per connection the broker reads that line
(bounded in bytes by `agybridge.lines.LineBuffer` and in time by ``io_timeout_s``),
checks the token in constant time, parses the payload into a `HookRequest`, and awaits
``decide(request)`` in a cancel scope whose deadline is ``wait_s``. While ``decide``
runs, a watcher task reads the connection: the helper never sends more, so EOF or a
reset means agy killed the hook (its timeout, an interrupt) and the pending ``decide``
is cancelled (kaoiro does the same, hooks-and-tools.md §A8). `Broker.deny_all_pending`
cancels every pending ``decide`` and answers deny at once (``session/cancel``).

Every way a request can fail is answered with a deny, never silence: too large, too
slow, malformed, wrong token, ``decide`` raised, the wait expired, more than
``max_connections`` at once ("busy"). The helper turns silence into a deny too, but a
reason the model can read is better.

Deadlines must nest (§A5): ``wait_s`` < the helper's reply timeout < the hooks.json
``timeout``; `HookRoot.max_wait_s` gives a ``wait_s`` that fits its root.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable

import attrs
import trio

from ..lines import LineBuffer, LineTooLongError
from . import hook
from .hook_root import check_private_dir
from .models import Decision, HookRequest, PayloadError, encode_decision

logger = logging.getLogger(__name__)

Decide = Callable[[HookRequest], Awaitable[Decision]]

#: The helper caps agy's input at 4 MiB; the token wrapper adds a little.
MAX_REQUEST_BYTES = hook.MAX_INPUT_BYTES + 64 * 2**10
DEFAULT_MAX_CONNECTIONS = 8  # KG allows 8 concurrent hook calls (§A8)
DEFAULT_IO_TIMEOUT_S = 10.0  # reading the request, writing the reply (§A10: 10 s)
DEFAULT_WAIT_S = 540.0  # below the helper's default 590 s (§A5: KG 540 < 590 < 600)
LISTEN_BACKLOG = 64
_CHUNK = 64 * 2**10
_ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_ACCEPT_RETRY_S = 0.1

TIMEOUT_REASON = "the user did not answer in time"
BUSY_REASON = "agybridge: too many permission requests at once"
BAD_TOKEN_REASON = "agybridge: permission request not authenticated"


@attrs.frozen
class BrokerStatistics:
    """A snapshot of the broker's counters.

    Attributes:
      pending: requests whose ``decide`` is running.
      connections: connections being served (busy ones not counted).
      served: requests answered so far (any decision).
      busy: connections refused with the "busy" deny.
      bad_tokens: requests refused for a wrong or missing token.
    """

    pending: int
    connections: int
    served: int
    busy: int
    bad_tokens: int


@attrs.define(eq=False)
class _Pending:
    request: HookRequest
    scope: trio.CancelScope
    forced: Decision | None = None  # set by deny_all_pending
    hung_up: bool = False


class Broker:
    """Serve one session's hook helpers on ``socket_path``; see the module docstring.

    Args:
      socket_path: where to listen; its directory must be private (0700, ours).
      token: the secret the helper sends (`HookRoot.token`).
      decide: awaited once per authenticated request; returns the `Decision`. It is
        cancelled when the wait bound expires, the hook goes away or
        `deny_all_pending` is called.
      wait_s: how long ``decide`` may take before the answer is a deny.
      max_connections: concurrent requests served; beyond, a "busy" deny.
      io_timeout_s: bound for reading a request and for writing a reply.
    """

    def __init__(
        self,
        socket_path: str,
        token: str,
        decide: Decide,
        *,
        wait_s: float = DEFAULT_WAIT_S,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        io_timeout_s: float = DEFAULT_IO_TIMEOUT_S,
        max_request_bytes: int = MAX_REQUEST_BYTES,
    ) -> None:
        if not token:
            raise ValueError("token must not be empty")
        if wait_s <= 0 or io_timeout_s <= 0 or max_connections < 1:
            raise ValueError(
                f"wait_s, io_timeout_s and max_connections must be positive, not "
                f"{wait_s!r}, {io_timeout_s!r}, {max_connections!r}"
            )
        self.socket_path = socket_path
        self._token = token.encode()
        self._decide = decide
        self._wait_s = wait_s
        self._max_connections = max_connections
        self._io_timeout_s = io_timeout_s
        self._max_request_bytes = max_request_bytes
        self._pending: set[_Pending] = set()
        self._connections = 0
        self._busy_connections = 0
        self._served = 0
        self._busy = 0
        self._bad_tokens = 0

    def statistics(self) -> BrokerStatistics:
        return BrokerStatistics(
            pending=len(self._pending),
            connections=self._connections,
            served=self._served,
            busy=self._busy,
            bad_tokens=self._bad_tokens,
        )

    def deny_all_pending(self, reason: str) -> int:
        """Answer every pending request with deny ``reason`` now; returns how many.

        Sync and non-blocking: each pending ``decide`` is cancelled and its connection
        task writes the deny as soon as it runs.
        """
        count = 0
        for pending in self._pending:
            if pending.forced is None:
                pending.forced = Decision.deny(reason)
                pending.scope.cancel(reason="permission requests denied: " + reason)
                count += 1
        return count

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen and serve until cancelled; ``task_status.started()`` once listening.

        The socket file is created with mode 0600. On cancellation nothing more is
        answered: pending ``decide`` calls are cancelled, connections and the listening
        socket are closed and the socket file is removed.

        Raises:
          HookRootError: the socket's directory is not private.
          OSError: the socket could not be bound (path taken, too long).
        """
        sock = self._open_socket()
        listener = trio.SocketListener(sock)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started()
                while True:
                    try:
                        stream = await listener.accept()
                    except OSError as exc:
                        if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                            raise
                        logger.error("permission broker accept failed: %s; retrying", exc)
                        await trio.sleep(_ACCEPT_RETRY_S)
                        continue
                    self._dispatch(nursery, stream)
        finally:
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(self.socket_path)

    def _open_socket(self) -> trio.socket.SocketType:
        """Bind and listen (sync: a local bind never blocks), socket file 0600."""
        check_private_dir(os.path.dirname(os.path.abspath(self.socket_path)))
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(self.socket_path)
            os.chmod(self.socket_path, 0o600)  # the 0700 dir already keeps others out
            sock.listen(LISTEN_BACKLOG)
        except BaseException:
            sock.close()
            raise
        return trio.socket.from_stdlib_socket(sock)

    def _dispatch(self, nursery: trio.Nursery, stream: trio.SocketStream) -> None:
        if self._connections < self._max_connections:
            self._connections += 1
            nursery.start_soon(self._connection_task, stream)
        elif self._busy_connections < self._max_connections:
            self._busy_connections += 1
            self._busy += 1
            nursery.start_soon(self._busy_task, stream)
        else:  # a flood: not even a busy answer; the helper denies on EOF
            self._busy += 1
            stream.socket.close()

    async def _connection_task(self, stream: trio.SocketStream) -> None:
        try:
            async with stream:
                decision = await self._serve(stream)
                if decision is None:
                    return
                self._served += 1
                with trio.move_on_after(self._io_timeout_s):
                    await stream.send_all(encode_decision(decision))
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            logger.debug("hook connection lost before the reply: %s", exc)
        except Exception:
            # A bug must not take the session's broker down: this call fails closed
            # (the helper denies on EOF) and the next one is served.
            logger.exception("permission broker failed while serving a hook call")
        finally:
            self._connections -= 1

    async def _busy_task(self, stream: trio.SocketStream) -> None:
        """Answer "busy", then drain the request so closing is not a reset."""
        try:
            async with stream:
                with trio.move_on_after(self._io_timeout_s):
                    await stream.send_all(encode_decision(Decision.deny(BUSY_REASON)))
                    seen = 0
                    while seen <= self._max_request_bytes:
                        data = await stream.receive_some(_CHUNK)
                        if not data:
                            break
                        seen += len(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self._busy_connections -= 1

    async def _serve(self, stream: trio.SocketStream) -> Decision | None:
        """The decision for one connection, or None when the helper went away."""
        with trio.move_on_after(self._io_timeout_s) as scope:
            try:
                line = await self._read_line(stream)
            except LineTooLongError:
                return Decision.deny("agybridge: permission request too large")
        if scope.cancelled_caught:
            return Decision.deny("agybridge: timed out reading the permission request")
        if line is None:
            return None
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return Decision.deny("agybridge: malformed permission request")
        if not isinstance(message, dict):
            return Decision.deny("agybridge: malformed permission request")
        token = message.get("token")
        if not isinstance(token, str) or not hmac.compare_digest(
            token.encode("utf-8", "surrogatepass"), self._token
        ):
            self._bad_tokens += 1
            logger.warning("permission request with a wrong token refused (%s)", self.socket_path)
            return Decision.deny(BAD_TOKEN_REASON)
        try:
            request = HookRequest.from_payload(message.get("payload"))
        except PayloadError as exc:
            return Decision.deny(f"agybridge: {exc}")
        return await self._decide_pending(stream, request)

    async def _read_line(self, stream: trio.SocketStream) -> bytes | None:
        buffer = LineBuffer(self._max_request_bytes)
        while True:
            line = buffer.next_line()
            if line is not None:
                return line
            if buffer.at_eof:
                return None
            data = await stream.receive_some(_CHUNK)
            if data:
                buffer.feed(data)
            else:
                buffer.feed_eof()

    async def _decide_pending(
        self, stream: trio.SocketStream, request: HookRequest
    ) -> Decision | None:
        pending = _Pending(request, trio.CancelScope(deadline=trio.current_time() + self._wait_s))
        decision: Decision | None = None
        self._pending.add(pending)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._hangup_watch_task, stream, pending)
                with pending.scope:
                    decision = await self._call_decide(request)
                nursery.cancel_scope.cancel()
        finally:
            self._pending.discard(pending)
        if pending.forced is not None:
            return pending.forced
        if pending.hung_up:
            logger.info("hook for %s went away before the answer", request.tool_name)
            return None
        return decision if decision is not None else Decision.deny(TIMEOUT_REASON)

    async def _call_decide(self, request: HookRequest) -> Decision:
        try:
            decision = await self._decide(request)
        except Exception:
            logger.exception("permission decide failed for %s", request.tool_name)
            return Decision.deny("agybridge: internal error while asking for permission")
        if not isinstance(decision, Decision):
            logger.error("permission decide returned %r, not a Decision", decision)
            return Decision.deny("agybridge: internal error while asking for permission")
        return decision

    async def _hangup_watch_task(self, stream: trio.SocketStream, pending: _Pending) -> None:
        """Cancel the pending decide when the helper closes (it never sends more)."""
        try:
            while await stream.receive_some(_CHUNK):
                pass  # stray bytes after the request: ignored
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        pending.hung_up = True
        pending.scope.cancel(reason="the hook helper went away")

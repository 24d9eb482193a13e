"""One agy process incarnation: spawn, read, write, and kill it for certain.

Theory of operation. :meth:`AgyChild.run` owns the process through a
:class:`~agybridge.agy.tree.ProcessTree` (its own process group, the
ownership marker every descendant inherits) and three tasks: a stdout reader (bounded line framer ->
:func:`parse_event`), a stderr reader (:func:`classify_stderr`, keeps a tail)
and a stdin writer (the only writer of agy's stdin, fed by a channel). Every
output reaches the owner as a :data:`ChildMessage` through one
:class:`MessageSink`, in order, ending with exactly one :class:`ChildExited`.
The lines of one stdout read travel as one :class:`ChildEvents` (a flood of
small events costs one hand-over per read, not per line). The owner's
``annotate`` hook sees each tool step as its line is read.

Killing (:meth:`AgyChild.kill`) cancels the scope around the wait, and the
tree escalates over the process group: SIGINT (agy answers with an ERROR
result "interrupted" and exits 1, contract.md §5), then SIGTERM, then
SIGKILL. The readers are outside that scope, so they keep draining: the
"interrupted" result and the last stderr lines still arrive. Whenever the
leader is gone, for whatever reason (killed, crashed, exited), the tree is
swept: the group, every descendant seen, and every process carrying this
invocation's marker — agy puts ``run_command`` children in sessions of their
own, and one started after the last look would otherwise survive agy (and a
grandchild holding the stdout pipe keep EOF from ever arriving).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol

import attrs
import trio

from ..lines import LineBuffer, LineTooLongError
from ..pipes import next_for_writer, receive_ready, write_nowait
from .events import AgyEvent, MalformedLine, StepUpdateEvent, parse_event
from .policy import EscalationPolicy
from .stderr import StderrLine, classify_stderr
from .tree import ProcessTree

logger = logging.getLogger(__name__)

STDERR_TAIL_LINES = 20
MAX_STDERR_LINE_BYTES = 1 * 2**20  # 1 MiB: stderr is human text
#: After the leader exited and the group was swept, how long the readers may
#: still drain. Only a process that escaped every sweep (double-forked out of
#: the tree before we saw it) can hold the pipes open beyond this.
DRAIN_AFTER_EXIT_S = 2.0
#: stdin lines waiting for the writer; prompts are queued by the session, so
#: more than a couple here means agy is not reading.
STDIN_QUEUE_LINES = 4
#: ``json.dumps(..., ensure_ascii=False)``, with one encoder for every line.
_encode_json = json.JSONEncoder(ensure_ascii=False).encode


class AgySpawnError(Exception):
    """agy could not be started at all (missing binary, bad cwd, ...).

    ``missing_cwd``: the working directory that is gone (or not a directory),
    when that is why."""

    def __init__(self, message: str, *, missing_cwd: str | None = None) -> None:
        super().__init__(message)
        self.missing_cwd = missing_cwd


@attrs.frozen
class ChildEvent:
    incarnation: int
    event: AgyEvent | MalformedLine
    #: What the owner's ``annotate`` hook noted the moment the line was read
    #: (tool steps only).
    attachment: object = None


@attrs.frozen
class ChildEvents:
    """The stdout events of one read, in order."""

    incarnation: int
    events: tuple[ChildEvent, ...]


@attrs.frozen
class ChildStderr:
    incarnation: int
    line: StderrLine


@attrs.frozen
class ChildExited:
    incarnation: int
    returncode: int | None
    #: True when the bridge killed it (cancel, close, respawn).
    killed: bool
    stderr_tail: tuple[str, ...]


ChildMessage = ChildEvent | ChildEvents | ChildStderr | ChildExited


class MessageSink(Protocol):
    """Where a child's messages go, in order; ``send`` waits for room (a slow
    consumer slows the child's readers down). A memory channel is one; a
    session hands its loop's inbox straight over (no task in between)."""

    async def send(self, message: ChildMessage, /) -> None: ...


def spawn_failure(program: str, cwd: str, exc: OSError) -> str:
    """Why ``program`` could not start in ``cwd``, blaming the right one.

    ENOENT/ENOTDIR/EACCES come back the same for a missing binary and a missing
    (or unusable) working directory: look at which one it is.
    """
    reason = exc.strerror or str(exc)
    if not os.path.isdir(cwd):
        what = "no longer exists" if not os.path.lexists(cwd) else "is not a directory"
        return f"could not start agy: the session's working directory {cwd!r} {what}"
    if isinstance(exc, FileNotFoundError):
        hint = "install agy or set AGY_BIN to its path"
        return f"could not start agy ({program!r}): {reason}: {hint}"
    return f"could not start agy ({program!r}) in {cwd!r}: {reason}"


def _spawn_error(program: str, cwd: str, exc: OSError) -> AgySpawnError:
    missing = None if os.path.isdir(cwd) else cwd
    return AgySpawnError(spawn_failure(program, cwd, exc), missing_cwd=missing)


class AgyChild:
    """One agy process; see the module docstring."""

    def __init__(
        self,
        *,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str] | None,
        incarnation: int,
        policy: EscalationPolicy,
        max_line_bytes: int,
        messages: MessageSink,
        annotate: Callable[[AgyEvent], object] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.incarnation = incarnation
        self.policy = policy
        self.max_line_bytes = max_line_bytes
        self._messages = messages
        self._annotate = annotate
        self._kill_scope = trio.CancelScope()
        # One per reader (a CancelScope serves one `with` block).
        self._stdout_drain = trio.CancelScope()
        self._stderr_drain = trio.CancelScope()
        self._stdin_send, self._stdin_receive = trio.open_memory_channel[bytes](STDIN_QUEUE_LINES)
        #: agy's stdin while its writer waits with nothing queued (else None).
        self._stdin_idle: trio.lowlevel.FdStream | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._tree = ProcessTree(f"agy[{incarnation}]", policy)
        self._killed = False
        self.pid: int | None = None
        self.returncode: int | None = None
        self.exited = trio.Event()

    @property
    def killed(self) -> bool:
        """The bridge asked this child to stop (cancel, close, respawn)."""
        return self._killed

    @property
    def alive(self) -> bool:
        return self.pid is not None and not self.exited.is_set()

    async def run(
        self, *, task_status: trio.TaskStatus[AgyChild] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Spawn agy and serve it until it exited and its pipes are drained.

        ``task_status.started(self)`` is called once the process exists. Ends
        with a :class:`ChildExited` message. Cancelling this task kills the
        process with the full escalation (shielded, bounded by the grace
        periods) before the cancellation propagates.

        Raises:
            AgySpawnError: the process could not be started.
        """
        # Opened outside the nursery (as trio's run_process does) so a spawn
        # failure reaches the caller as itself, not inside an exception group.
        try:
            proc = await self._tree.open_process(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=self.env,
            )
        except OSError as exc:
            raise _spawn_error(self.argv[0], self.cwd, exc) from exc
        self.pid = proc.pid
        logger.info("agy[%s] started pid=%s argv=%s", self.incarnation, proc.pid, self.argv)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._supervise_task, proc)
                # Each reader in its drain scope, which is not the kill scope.
                nursery.start_soon(
                    _read_lines,
                    proc.stdout,
                    self.max_line_bytes,
                    self._on_stdout_lines,
                    self._stdout_drain,
                )
                nursery.start_soon(
                    _read_lines,
                    proc.stderr,
                    MAX_STDERR_LINE_BYTES,
                    self._on_stderr_lines,
                    self._stderr_drain,
                )
                nursery.start_soon(self._stdin_task, proc.stdin)
                task_status.started(self)
        finally:
            self.exited.set()
        await self._messages.send(
            ChildExited(
                incarnation=self.incarnation,
                returncode=self.returncode,
                killed=self._killed,
                stderr_tail=tuple(self._stderr_tail),
            )
        )

    async def send_user(self, text: str) -> None:
        """Queue one user turn for agy's stdin (contract.md §2.1).

        Raises:
            trio.ClosedResourceError: the child's stdin is already closed.
        """
        data = _encode_json({"event": "user", "message": {"content": text}}).encode() + b"\n"
        stdin = self._stdin_idle
        if stdin is not None:
            # Nothing queued or being written: written now (no task switch);
            # what the pipe does not take goes to the writer, ahead of the rest.
            data = data[write_nowait(stdin, data) :]
            if not data:
                return
            self._stdin_idle = None
        try:
            self._stdin_send.send_nowait(data)  # room in the queue: no yield
        except trio.WouldBlock:
            await self._stdin_send.send(data)

    def close_stdin(self) -> None:
        """Ask agy to exit after the current turn (EOF, contract.md §2.4)."""
        self._end_stdin()

    def _end_stdin(self) -> None:
        self._stdin_idle = None  # nothing more is written now either
        self._stdin_send.close()

    def kill(self, reason: str) -> None:
        """Start the SIGINT -> SIGTERM -> SIGKILL escalation; idempotent, sync."""
        if not self._killed:
            logger.info("agy[%s] pid=%s: killing (%s)", self.incarnation, self.pid, reason)
        self._killed = True
        self._kill_scope.cancel(reason=reason)

    async def _supervise_task(self, proc: trio.Process) -> None:
        try:
            with self._kill_scope:
                await proc.wait()
        finally:
            if proc.returncode is None:
                # Killed by us, or our owner was cancelled: escalate either way.
                with trio.CancelScope(shield=True):
                    await self._tree.escalate(proc)
            # Nobody can write to a dead agy: end the stdin writer.
            self._end_stdin()
            self.returncode = proc.returncode
            with trio.CancelScope(shield=True):
                await self._tree.sweep()
            logger.info(
                "agy[%s] pid=%s exited with %s", self.incarnation, proc.pid, proc.returncode
            )
            # Readers get a bounded drain once nothing of ours can hold the pipes.
            deadline = trio.current_time() + DRAIN_AFTER_EXIT_S
            self._stdout_drain.deadline = self._stderr_drain.deadline = deadline

    async def _on_stdout_lines(self, lines: list[bytes | LineTooLongError]) -> None:
        # One message per read, however many lines: one hand-over to the owner.
        events = tuple(map(self._stdout_event, lines))
        await self._messages.send(ChildEvents(self.incarnation, events))

    def _stdout_event(self, line: bytes | LineTooLongError) -> ChildEvent:
        if type(line) is not bytes:  # the exact type: no call on the hot path
            logger.error("agy[%s] stdout: %s", self.incarnation, line)
            return ChildEvent(self.incarnation, MalformedLine(line="", reason=str(line)))
        event = parse_event(line)
        if type(event) is not StepUpdateEvent or event.step_update.step_type != "tool":
            return ChildEvent(self.incarnation, event)
        # Tool steps are when agy grows children in groups of their own.
        if not self.exited.is_set():
            self._tree.remember_descendants()
        attachment = None
        if self._annotate is not None:
            # Synchronous, right as the line is read: agy acts on what it
            # announces within milliseconds (e.g. writes the file it edits).
            try:
                attachment = self._annotate(event)
            except Exception:
                logger.exception("agy[%s]: annotating an event failed", self.incarnation)
        return ChildEvent(self.incarnation, event, attachment)

    async def _on_stderr_lines(self, lines: list[bytes | LineTooLongError]) -> None:
        for line in lines:
            if isinstance(line, LineTooLongError):
                logger.warning("agy[%s] stderr: over-long line dropped", self.incarnation)
                continue
            text = line.decode("utf-8", "replace")
            self._stderr_tail.append(text)
            logger.info("agy[%s] stderr: %s", self.incarnation, text)
            await self._messages.send(ChildStderr(self.incarnation, classify_stderr(text)))

    async def _stdin_task(self, stream: trio.abc.SendStream) -> None:
        pipe = stream if type(stream) is trio.lowlevel.FdStream else None

        def park(parked: bool) -> None:
            # Idle with nothing queued: `send_user` may write itself.
            self._stdin_idle = pipe if parked else None

        async with stream, self._stdin_receive:
            while True:
                try:
                    line = await next_for_writer(self._stdin_receive, park)
                except trio.EndOfChannel:
                    break
                try:
                    await stream.send_all(line)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    logger.info("agy[%s] stdin closed by agy", self.incarnation)
                    return
        # Leaving closes agy's stdin: EOF means "finish the turn, then exit".


async def _read_lines(
    stream: trio.abc.ReceiveStream,
    max_line_bytes: int,
    on_lines: Callable[[list[bytes | LineTooLongError]], Awaitable[None]],
    drain: trio.CancelScope,
) -> None:
    """Feed the non-blank lines of ``stream`` (or the error for an over-long
    one, which is then skipped) to ``on_lines`` until EOF, a read's worth at a
    time, inside ``drain`` (the reader's bounded drain once agy is gone);
    closes the stream. A broken pipe counts as EOF: the process is gone
    either way."""
    framer = LineBuffer(max_line_bytes)
    with drain:
        async with stream:
            while True:
                try:
                    chunk = await receive_ready(stream)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    chunk = b""
                if chunk:
                    read = framer.feed_and_drain(chunk)
                else:
                    framer.feed_eof()
                    read = framer.drain()
                # Blank lines are dropped (an over-long one is kept: its error).
                lines = [line for line in read if type(line) is not bytes or line.strip()]
                if lines:
                    await on_lines(lines)
                if not chunk:
                    return
                # Not kept while waiting for the next read: a line can be a turn's
                # whole text (agy's result restates it).
                del lines, read, chunk

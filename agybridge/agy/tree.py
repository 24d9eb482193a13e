"""One agy invocation's process tree: spawn it owned, stop it for certain.

Every agy invocation — the session child, ``--version``, ``models``,
``agents``, the ``-p /hooks`` gate check — goes through :class:`ProcessTree`:

* it is spawned in a process group of its own (``start_new_session``) with the
  ownership marker ``AGYBRIDGE_OWNER=<bridge>/<n>`` in its environment
  (`agybridge.procfs`), which every descendant inherits whatever group or
  session it moves to (a wrapper script's real agy, agy's ``run_command``
  children);
* stopping it walks one ladder: SIGINT to the group (agy answers "interrupted",
  contract.md §5), SIGTERM, SIGKILL, each after its grace;
* once the leader is gone — killed, crashed, or exited on its own — the group,
  every descendant seen while it ran and every process carrying its marker are
  SIGKILLed (a grandchild holding a pipe would otherwise block EOF forever) and
  waited for, bounded.

Why a marker and not a child subreaper (``PR_SET_CHILD_SUBREAPER``): a
subreaper only re-parents orphans, which then still have to be told apart
(which session?) and reaped without stealing the exit statuses trio waits for;
and it dies with the bridge, so it does nothing for a SIGKILLed bridge. The
marker names the owner in every descendant, also after the bridge's death,
which is what the watchdog and the next start-up use.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from .. import procfs
from .policy import EscalationPolicy

logger = logging.getLogger(__name__)

#: How long the sweep waits for SIGKILLed processes to be gone. SIGKILL
#: cannot be ignored, so this only bounds a process stuck in the kernel.
SWEEP_WAIT_S = 2.0
#: Scans per sweep: each kills whom the previous ones missed (a fork in between).
SWEEP_ROUNDS = 5
#: After the leader exited and its tree was swept, how long pipes may still
#: drain. Only a process that escaped every sweep can hold them beyond this.
DRAIN_AFTER_EXIT_S = 2.0
#: The output a captured invocation keeps (``agy models`` is a few KiB).
MAX_CAPTURE_BYTES = 4 * 2**20

_BRIDGE = procfs.bridge_identity()
_counter = itertools.count(1)


def bridge_identity() -> str:
    """This bridge's identity in every marker it hands out."""
    return _BRIDGE


class ProcessTree:
    """The ownership of one invocation; see the module docstring."""

    def __init__(self, label: str, policy: EscalationPolicy) -> None:
        self.label = label
        self.policy = policy
        self.marker = f"{_BRIDGE}/{next(_counter)}"
        self.pid: int | None = None
        self._known: dict[int, procfs.ProcRef] = {}

    def env(self, base: Mapping[str, str] | None) -> dict[str, str]:
        """``base`` (default: our environment) plus this invocation's marker."""
        env = dict(os.environ if base is None else base)
        env[procfs.OWNER_VAR] = self.marker
        return env

    async def open_process(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None, **options: Any
    ) -> trio.Process:
        """Spawn ``argv`` in its own process group, marked (see `trio.lowlevel.open_process`)."""
        proc = await trio.lowlevel.open_process(
            list(argv), env=self.env(env), start_new_session=True, **options
        )
        self.pid = proc.pid
        return proc

    def remember_descendants(self) -> None:
        """Note the leader's descendants now (they may leave the group later)."""
        if self.pid is not None:
            for ref in procfs.descendants(self.pid):
                self._known[ref.pid] = ref

    async def escalate(self, proc: trio.Process) -> None:
        """SIGINT, SIGTERM, SIGKILL to the group, each after the previous grace;
        returns once the leader has exited. Call shielded."""
        self.remember_descendants()
        ladder = (
            (signal.SIGINT, self.policy.sigint_grace_s),
            (signal.SIGTERM, self.policy.sigterm_grace_s),
        )
        for sig, grace in ladder:
            procfs.signal_group(proc.pid, sig)
            with trio.move_on_after(grace):
                await proc.wait()
                return
            logger.warning(
                "%s pid=%s ignored %s for %.1f s; escalating", self.label, proc.pid, sig.name, grace
            )
            self.remember_descendants()
        procfs.signal_group(proc.pid, signal.SIGKILL)
        await proc.wait()

    async def sweep(self) -> int:
        """SIGKILL what is left of the tree and wait until it is gone (bounded).

        Returns how many processes were signalled. Call it right after the
        leader was reaped: its group is signalled at once (its pid cannot have
        been handed out again in between: pids are allocated in sequence, and
        not at all while the group has members). A descendant's pid names a
        group only while that descendant still runs (same start time); a dead
        one's pid may already lead someone else's group. Then every member,
        descendant seen and marked process is killed through a pidfd checked
        against its start time, scanning again until a round finds nobody new
        (a member may fork meanwhile). A pidfd becomes readable when its process
        exits, so the wait is on that event, not a polling loop.
        """
        if self.pid is None:
            return 0
        procfs.signal_group(self.pid, signal.SIGKILL)
        alive = [ref for ref in self._known.values() if ref.alive()]
        pgids = {self.pid, *(ref.pid for ref in alive)}
        for ref in alive:
            if ref.leads_group():
                procfs.signal_group(ref.pid, signal.SIGKILL)
        fds: list[int] = []
        seen: set[procfs.ProcRef] = set()
        try:
            for _ in range(SWEEP_ROUNDS):
                targets = await trio.to_thread.run_sync(self._targets, pgids)
                fresh = [ref for ref in targets if ref not in seen]
                if not fresh:
                    break
                seen.update(fresh)
                fds += procfs.kill_refs(fresh)
            with trio.move_on_after(SWEEP_WAIT_S) as waited:
                for fd in fds:
                    await trio.lowlevel.wait_readable(fd)
            if waited.cancelled_caught:
                logger.warning(
                    "%s: %d process(es) of its tree were still dying after %.1f s",
                    self.label,
                    len(fds),
                    SWEEP_WAIT_S,
                )
        finally:
            for fd in fds:
                trio.lowlevel.notify_closing(fd)
                os.close(fd)
        if fds:
            logger.info("%s: swept %d leftover process(es)", self.label, len(fds))
        return len(fds)

    def _targets(self, pgids: set[int]) -> list[procfs.ProcRef]:
        targets = {ref.pid: ref for ref in procfs.group_members(pgids)}
        targets.update(self._known)
        targets.update((ref.pid, ref) for ref in procfs.marked(self.marker))
        return list(targets.values())


@attrs.frozen
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes


async def run_owned(
    argv: Sequence[str],
    *,
    label: str,
    env: Mapping[str, str] | None = None,
    policy: EscalationPolicy | None = None,
) -> Completed:
    """Run a short agy invocation to completion (stdin /dev/null, output captured).

    The tree is swept when the leader exits, so a wrapper's orphans do not
    outlive it. Cancellation stops the tree with the full ladder (shielded,
    bounded by the grace periods), then re-raises.

    Raises:
        OSError: the process could not be started.
    """
    tree = ProcessTree(label, policy or EscalationPolicy())
    proc = await tree.open_process(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    outputs: dict[str, bytearray] = {}
    drain = trio.CancelScope()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_capture, drain, proc.stdout, proc.stderr, outputs)
            await proc.wait()
            # The leader is gone: whatever it left must not hold the pipes.
            with trio.CancelScope(shield=True):
                await tree.sweep()
            drain.deadline = trio.current_time() + DRAIN_AFTER_EXIT_S
    except BaseException:
        with trio.CancelScope(shield=True):
            if proc.returncode is None:
                await tree.escalate(proc)
            await tree.sweep()
        raise
    assert proc.returncode is not None
    return Completed(
        proc.returncode, bytes(outputs.get("stdout", b"")), bytes(outputs.get("stderr", b""))
    )


async def _capture(
    drain: trio.CancelScope,
    stdout: trio.abc.ReceiveStream,
    stderr: trio.abc.ReceiveStream,
    into: dict[str, bytearray],
) -> None:
    with drain:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_capture_one, stdout, into, "stdout")
            nursery.start_soon(_capture_one, stderr, into, "stderr")


async def _capture_one(
    stream: trio.abc.ReceiveStream, into: dict[str, bytearray], key: str
) -> None:
    buffer = into.setdefault(key, bytearray())
    async with stream:
        while True:
            try:
                chunk = await stream.receive_some()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            if not chunk:
                return
            buffer += chunk[: max(0, MAX_CAPTURE_BYTES - len(buffer))]

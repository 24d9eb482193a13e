"""A session's file-change log: what agy wrote inside the session's roots.

Which changes are seen: every agy edit tool step (``write_to_file``,
``replace_file_content``, ... — ``tools.EDIT_TOOLS``) whose target lies inside
the session's roots. The "before" side is read when the permission hook is
called for the step (before agy writes; hooks-and-tools.md §A) or, failing
that, from the snapshot taken as the step's ACTIVE line was read
(``reads.snapshot_edit_target``); the "after" side is read when the step is
DONE. A step whose before side was never seen is still recorded (with an
unknown before: it cannot be rolled back). Files changed by shell commands
are not seen: agy reports no file list for them.

Provenance: a change is ``changedAfter`` when the file was different from
what agy wrote by the time of the next recorded change of that file or, for
the last one, now — someone else (the user, a command, another tool) edited it.

The log is what the session holds: it records (:class:`~.changes.Mutation`),
saves and loads itself, answers queries, and runs rollbacks one at a time in
wire order; what a rollback plans, refuses and restores is ``rollback.py``'s.
A rollback is itself recorded (``source: "rollback"``), so it can be undone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import trio

from ..agy.events import STATE_DONE, StepUpdateEvent
from ..store import MUTATION_LOG_KEY, AsyncStore, StoreError, referenced_blobs
from ..translate.tools import edit_target
from . import rollback
from .changes import Mutation, inside
from .rollback import Restore
from .snapshots import BlobStore, Snapshot, read_snapshot

logger = logging.getLogger(__name__)


class MutationLog:
    """A session's file mutations; see the module docstring."""

    def __init__(
        self,
        store: AsyncStore | None,
        session_id: str,
        roots: Sequence[str],
        current_turn: Callable[[], int],
    ) -> None:
        self._store = store
        self._session_id = session_id
        self.roots = tuple(roots)
        self._current_turn = current_turn
        self.entries: list[Mutation] = []
        self.blobs = BlobStore(store)
        #: (turn, step index) -> (path, before) seen before agy wrote.
        self._before: dict[tuple[int, int], tuple[str, Snapshot | None]] = {}
        #: What agy must be told on its next turn (a rollback happened).
        self.agy_note: str | None = None
        self._loaded = store is None
        #: A save found no session row (deleted elsewhere): said once.
        self._unsaved_warned = False
        self._lock = trio.Lock()
        #: One rollback at a time: each plans from the files the last one left.
        self._rollback_lock = trio.Lock()
        #: Rollback requests read but not answered yet (``rollback_arrived``).
        self._rollbacks_due = 0
        self._rollback_done = trio.Event()

    # --- recording -----------------------------------------------------------

    async def note_before(self, step: int, path: str) -> None:
        """The permission hook is about to let agy write ``path`` in ``step``."""
        if not inside(path, self.roots):
            return
        read = await trio.to_thread.run_sync(read_snapshot, path)
        key = (self._current_turn(), step)
        if read is None or key in self._before:
            return
        snapshot, data = read
        self.blobs.keep(snapshot, data)
        self._before[key] = (path, snapshot)

    def note_before_text(self, step: int, path: str, text: str | None) -> None:
        """The snapshot taken as the step's ACTIVE line was read (text or absent)."""
        key = (self._current_turn(), step)
        if key in self._before or not inside(path, self.roots):
            return
        if text is None:
            self._before[key] = (path, Snapshot.absent())
            return
        data = text.encode("utf-8")
        snapshot = Snapshot.of_bytes(data)
        self.blobs.keep(snapshot, data)
        self._before[key] = (path, snapshot)

    async def step_done(
        self, step: int, path: str, tool: str, tool_call_id: str | None
    ) -> Mutation | None:
        """agy finished writing ``path``: record the change (None: no change)."""
        if not inside(path, self.roots):
            return None
        turn = self._current_turn()
        _, before = self._before.pop((turn, step), (path, None))
        read = await trio.to_thread.run_sync(read_snapshot, path)
        if read is None:
            return None
        after, data = read
        if before is not None and before.same_as(after):
            return None
        self.blobs.keep(after, data)
        return await self._append(
            turn,
            path,
            before=before,
            after=after,
            source="agy",
            tool=tool,
            tool_call_id=tool_call_id,
        )

    async def _append(self, turn: int, path: str, **fields: Any) -> Mutation:
        await self.load()
        mutation = Mutation(seq=len(self.entries), turn=turn, path=path, **fields)
        self.entries.append(mutation)
        await self.save()
        return mutation

    # --- persistence -----------------------------------------------------------

    async def load(self) -> None:
        """Read the log back from the store once (a resumed session)."""
        async with self._lock:
            if self._loaded:
                return
            self._loaded = True
            assert self._store is not None
            try:
                stored = await self._store.meta_get(MUTATION_LOG_KEY + self._session_id)
            except StoreError as exc:
                logger.warning(
                    "session %s: could not read its mutations: %s", self._session_id, exc
                )
                return
            if not isinstance(stored, list):
                return
            self.entries = [Mutation.from_store(value) for value in stored] + self.entries
            digests = {
                s.sha256
                for m in self.entries
                for s in (m.before, m.after)
                if s is not None and s.sha256 is not None
            }
            await self.blobs.load(digests)

    async def save(self) -> None:
        """Store the log with the snapshots it newly refers to, in one
        transaction, while the session's row exists: a session deleted meanwhile
        (``agybridge sessions delete``, another bridge) keeps its log in memory
        only, like its history (`SessionBook`). A failure is logged."""
        if self._store is None:
            return
        log = [m.to_store() for m in self.entries]
        blobs = self.blobs.unsaved(referenced_blobs(log))
        try:
            written = await self._store.save_edit_log(self._session_id, log, blobs)
        except StoreError as exc:
            logger.warning("session %s: could not save its mutations: %s", self._session_id, exc)
            return
        if written:
            self.blobs.saved(blobs)
        elif not self._unsaved_warned:
            self._unsaved_warned = True
            logger.warning(
                "session %s is no longer in the session database (deleted): it keeps "
                "its file changes in memory here, but they are no longer saved",
                self._session_id,
            )

    # --- queries -----------------------------------------------------------------

    async def with_provenance(self, since_turn: int = 0) -> list[tuple[Mutation, bool | None]]:
        """Entries of turns >= ``since_turn``, each with ``changedAfter``
        (None: the file cannot be read now)."""
        await self.load()
        latest: dict[str, Mutation] = {}
        changed: dict[int, bool | None] = {}
        for mutation in self.entries:
            previous = latest.get(mutation.path)
            if previous is not None:
                changed[previous.seq] = mutation.before is not None and not (
                    mutation.before.same_as(previous.after)
                )
            latest[mutation.path] = mutation
        paths = sorted(latest)
        now = await trio.to_thread.run_sync(lambda: {p: read_snapshot(p) for p in paths})
        for path, mutation in latest.items():
            read = now[path]
            changed[mutation.seq] = None if read is None else not read[0].same_as(mutation.after)
        return [(m, changed[m.seq]) for m in self.entries if m.turn >= since_turn]

    # --- rollback ----------------------------------------------------------------

    def undo_target(self) -> int | None:
        """The latest turn with agy changes not undone yet (for ``/undo``)."""
        return rollback.undo_target(self.entries)

    async def plan(self, to_turn: int) -> list[Restore]:
        """What rolling back to the start of turn ``to_turn`` would do
        (:func:`~.rollback.plan_for`)."""
        await self.load()
        return await rollback.plan_for(self.entries, to_turn, self.blobs)

    async def rollback(self, to_turn: int, *, force: bool, dry_run: bool) -> list[Restore]:
        """Restore the files of turns >= ``to_turn``; returns the plan carried out.

        Raises:
            RollbackRefused: a file changed since agy wrote it (without
                ``force``), or a file's earlier state is unknown.
        """
        async with self._rollback_lock:
            return await self._rollback(to_turn, force=force, dry_run=dry_run)

    async def _rollback(self, to_turn: int, *, force: bool, dry_run: bool) -> list[Restore]:
        plan = await self.plan(to_turn)
        rollback.refuse_unsafe(plan, force=force)
        if dry_run:
            return plan
        turn = self._current_turn()
        done: list[Restore] = []
        for restore in plan:
            if restore.action == "unchanged":
                continue
            before = await rollback.put_back(restore, self.blobs)
            await self._append(
                turn,
                restore.path,
                before=before,
                after=restore.target,
                source="rollback",
                rolled_back_to=to_turn,
            )
            done.append(restore)
        if done:
            self.agy_note = rollback.note_for_agy(to_turn, done, self.roots)
        return plan

    def rollback_arrived(self) -> None:
        """A rollback request was read (wire order): prompts read after it
        wait for it in :meth:`settled`."""
        self._rollbacks_due += 1

    def rollback_left(self) -> None:
        """That request was answered (whatever the answer)."""
        self._rollbacks_due = max(0, self._rollbacks_due - 1)
        self._rollback_done.set()
        self._rollback_done = trio.Event()

    async def settled(self) -> None:
        """Return once no rollback is due or running (at once, without a
        checkpoint, when none is)."""
        while self._rollbacks_due:
            await self._rollback_done.wait()
        if self._rollback_lock.locked():  # /undo, a prompt itself
            async with self._rollback_lock:
                pass

    def take_agy_note(self) -> str | None:
        note, self.agy_note = self.agy_note, None
        return note


async def observe_step(
    log: MutationLog, event: object, attachment: object, call_prefix: str
) -> None:
    """Record what an agy edit step changed (called for each tool step of a turn)."""
    if not isinstance(event, StepUpdateEvent):
        return
    step = event.step_update
    if step.step_type != "tool" or step.tool_info is None:
        return
    name = step.tool_name or step.tool_info.name or ""
    target = edit_target(name, step.tool_info.parameters)
    if target is None:
        return
    if isinstance(attachment, dict) and target in attachment:
        log.note_before_text(step.step_index, target, attachment[target])
    if step.state == STATE_DONE:
        await log.step_done(step.step_index, target, name, f"{call_prefix}-{step.step_index}")

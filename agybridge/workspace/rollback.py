"""Rolling a session's files back to the start of a turn: plan, refusals, restore.

What the mutation log (``mutations.py``) asks when a client rolls back or types
``/undo``; the log keeps the order (one rollback at a time) and records what
was restored. Rollback to turn N restores every file changed in turn N or
later to its state before its first change in that range, and refuses
(listing them) when a file no longer holds what was last recorded for it,
unless forced, when its earlier bytes were not kept, or when a directory now
stands where agy wrote a file. Once files are restored, agy is told on its
next turn (:func:`note_for_agy`): its conversation still holds the undone edits.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

import attrs
import trio

from .changes import Mutation, inside
from .snapshots import BlobStore, Snapshot, read_snapshot

#: How a refused rollback says it can be forced (``/undo`` says it its way).
FORCE_HINT = "pass force: true to overwrite them"


@attrs.frozen
class Restore:
    """One file of a rollback plan."""

    path: str
    target: Snapshot | None  # None: the state before is unknown
    expected: Snapshot  # what the log says the file holds now
    current: Snapshot | None  # what it holds (None: unreadable)
    restorable: bool
    #: The current bytes (kept so that the rollback can be undone too).
    current_data: bytes | None = attrs.field(default=None, eq=False, repr=False)
    #: The path is a directory now: no file can be put there, nor removed.
    directory: bool = False

    @property
    def conflict(self) -> bool:
        return self.current is None or not self.current.same_as(self.expected)

    @property
    def action(self) -> str:
        if self.target is None or not self.restorable or self.directory:
            return "unrestorable"
        if self.current is not None and self.current.same_as(self.target):
            return "unchanged"
        return "restore" if self.target.exists else "delete"


class RollbackRefused(Exception):
    """Files changed since agy wrote them (or cannot be restored); ``plan`` says which."""

    def __init__(self, message: str, plan: list[Restore]) -> None:
        super().__init__(message)
        self.plan = plan


def undo_target(entries: Sequence[Mutation]) -> int | None:
    """The latest turn with agy changes not undone yet (for ``/undo``)."""
    floor: float = float("inf")
    for mutation in reversed(entries):
        if mutation.source == "rollback":
            floor = min(floor, mutation.rolled_back_to or 0)
        elif mutation.turn < floor:
            return mutation.turn
    return None


async def plan_for(entries: Sequence[Mutation], to_turn: int, blobs: BlobStore) -> list[Restore]:
    """What rolling back to the start of turn ``to_turn`` would do: undo every
    change from agy's first change in that turn or later on (rollbacks made
    before it are left alone). The files are read in a worker thread."""
    first: dict[str, Mutation] = {}
    last: dict[str, Mutation] = {}
    start = next((m.seq for m in entries if m.turn >= to_turn and m.source == "agy"), None)
    for mutation in entries:
        if start is not None and mutation.seq >= start:
            first.setdefault(mutation.path, mutation)
            last[mutation.path] = mutation
    paths = list(first)
    now = await trio.to_thread.run_sync(
        lambda: [(read_snapshot(p), os.path.isdir(p)) for p in paths]
    )
    restores = []
    for path, (read, directory) in zip(paths, now, strict=True):
        target = first[path].before
        restorable = target is not None and blobs.has(target)
        current, data = (None, None) if read is None else read
        restores.append(
            Restore(path, target, last[path].after, current, restorable, data, directory=directory)
        )
    return restores


def refuse_unsafe(plan: list[Restore], *, force: bool) -> None:
    """Raise :class:`RollbackRefused` unless every file of ``plan`` can be
    restored and (without ``force``) still holds what agy last wrote."""
    directories = [r.path for r in plan if r.directory]
    if directories:
        what = "is a directory" if len(directories) == 1 else "are directories"
        raise RollbackRefused(
            f"cannot roll back: {', '.join(directories)} {what} now, where agy wrote "
            "a file; move it away first",
            plan,
        )
    unrestorable = [r.path for r in plan if r.action == "unrestorable"]
    if unrestorable:
        raise RollbackRefused(
            "cannot roll back: the earlier content of "
            + ", ".join(unrestorable)
            + " was not kept (too large, or written before the bridge could look)",
            plan,
        )
    conflicts = [r.path for r in plan if r.conflict]
    if conflicts and not force:
        raise RollbackRefused(
            "these files changed after agy wrote them: " + ", ".join(conflicts) + f"; {FORCE_HINT}",
            plan,
        )


async def put_back(restore: Restore, blobs: BlobStore) -> Snapshot:
    """Put one file of a plan back (in a worker thread) and keep the bytes it
    held; returns that state, the "before" of the rollback's own record."""
    assert restore.target is not None
    data = blobs.get(restore.target) if restore.target.exists else None
    await trio.to_thread.run_sync(_put, restore.path, data)
    before = restore.current if restore.current is not None else restore.expected
    blobs.keep(before, restore.current_data)
    return before


def _put(path: str, data: bytes | None) -> None:
    """Write ``data`` atomically (None: remove the file)."""
    if data is None:
        if os.path.lexists(path):
            os.remove(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temp = f"{path}.agybridge-rollback"
    try:
        with open(temp, "wb") as file:
            file.write(data)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.remove(temp)  # never leave the temporary file behind
        raise


def note_for_agy(to_turn: int, done: Sequence[Restore], roots: Sequence[str]) -> str:
    """Text put before the user's next prompt, so the model's picture of the
    files matches the disk (its conversation still holds the undone turns)."""
    lines = []
    for restore in done:
        shown = restore.path
        if inside(restore.path, roots[:1]):
            shown = os.path.relpath(restore.path, roots[0])
        verb = "restored to its earlier content"
        if restore.action == "delete":
            verb = "deleted (it did not exist before)"
        lines.append(f"- {shown}: {verb}")
    return (
        "[agybridge] Before this message the user rolled back the file changes made "
        f"from turn {to_turn} on (your earlier edits to these files are undone):\n"
        + "\n".join(lines)
        + "\nRead these files again before relying on what you remember of them.\n\n"
    )

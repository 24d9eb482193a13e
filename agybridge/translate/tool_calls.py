"""agy tool steps -> ACP ``tool_call`` / ``tool_call_update`` (pure).

Each tool step is keyed by its ``step_index`` (ACTIVE 0..n times, then one
DONE or ERROR; contract.md §3.2). First sight announces the call (Zed drops
updates for calls it never saw), later sights send only what changed. Edits
get a diff from what the session read from disk when the step was first seen
and when it finished; commands render as Zed display-only terminals when the
client asked for them (acp/brief.md §8), else as text.
"""

from __future__ import annotations

from typing import Any

import attrs

from .. import causes
from ..acp import models
from ..agy import StepUpdate
from . import blocked
from .card_text import BACKGROUND_DONE, BACKGROUND_RUNNING, capped, fenced, text_content
from .observation import Observation
from .questions import QUESTION_TOOL, unanswered_meta
from .tools import HIDDEN_TOOLS, describe_tool, edit_target

_UNREAD = object()  # the session did not read the file: no diff


@attrs.define
class _Call:
    call_id: str
    name: str
    title: str
    params: dict[str, Any] | None
    terminal_id: str | None
    kind: str = "other"
    status: str = "in_progress"
    #: The permission gate saw this step (hook call).
    gated: bool = False
    before: object = _UNREAD
    output_sent: int = 0
    finished: bool = False
    had_output: bool = False
    #: agy went on to other steps while this command ran: promoted to a background
    #: task (run_command's WaitMsBeforeAsync passed; kaoiro print-mode-background-tasks).
    background: bool = False
    #: The permission agy's own policy blocked this step for (see blocked.py).
    blocked: str | None = None


#: How agy words a tool call the bridge's PreToolUse hook denied (contract.md §4;
#: untether-1.3.1-hook-deny-mid-turn-user-input).
HOOK_DENIAL = "tool call denied by pre-tool hook"


def _exit_meta(call: _Call, cause: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A failed command's terminal ends (agy reports no exit code, hooks-and-tools.md §B2);
    ``cause``: the catalogue's ``_meta`` of why the call failed, if the bridge knows."""
    if call.terminal_id is None:
        return cause
    ended = {"terminal_id": call.terminal_id, "exit_code": None, "signal": None}
    return {**(cause or {}), "terminal_exit": ended}


@attrs.define
class ToolCallTracker:
    """Tool calls of one turn; see the module docstring."""

    call_prefix: str
    cwd: str
    #: The client sent ``_meta.terminal_output: true`` (Zed's terminal extension).
    terminals: bool = False
    #: Hold the ✓ of a guarded step that ended DONE without output until the
    #: next event (the turn mapper's choice: it alone sees what follows).
    hold_silent_done: bool = False
    calls: dict[int, _Call] = attrs.Factory(dict)
    _gated_early: set[int] = attrs.Factory(set)
    #: Steps that ended DONE without output and may have been soft-denied
    #: (agy 1.3.x): their ✓ waits for the next event (blocked.py).
    _held: dict[int, Observation] = attrs.Factory(dict)
    #: Commands announced and not finished, by step index (background detection).
    _open_commands: dict[int, _Call] = attrs.Factory(dict)

    def feed(self, step: StepUpdate, seen: Observation) -> list[models.SessionUpdate]:
        info = step.tool_info
        name = step.tool_name or (info.name if info else None) or "unknown_tool"
        if name in HIDDEN_TOOLS:
            return []
        params = info.parameters if info and info.parameters is not None else None
        call = self.calls.get(step.step_index)
        updates: list[models.SessionUpdate] = []
        if call is None:
            call = self._announce(step, name, params, seen, updates)
        elif params is not None and params != call.params and not call.gated:
            # (A gated call already has agy's full arguments from the hook;
            # the stream's are a trimmed subset, §B2.)
            call.params = params
            desc = describe_tool(name, params, self.cwd)
            call.title, call.kind = desc.title, desc.kind
            updates.append(
                models.ToolCallUpdate(
                    tool_call_id=call.call_id,
                    title=desc.title,
                    kind=desc.kind,
                    locations=list(desc.locations) or None,
                    raw_input=params,
                )
            )
            self._note_before(call, seen)
        if call.finished:
            return updates
        output = info.output if info else None
        if step.state == "ERROR" or (info and info.error):
            updates.append(self._failed(call, step))
        elif (
            step.state == "DONE"
            and not output
            and self.hold_silent_done
            and name in blocked.GUARDED_TOOLS
        ):
            call.finished = True
            self._held[step.step_index] = seen
        elif step.state == "DONE":
            updates.append(self._completed(call, output, seen))
        elif output and call.terminal_id and len(output) > call.output_sent:
            # A long-running command streaming output on ACTIVE updates.
            updates.append(
                models.ToolCallUpdate(
                    tool_call_id=call.call_id,
                    meta={
                        "terminal_output": {
                            "terminal_id": call.terminal_id,
                            "data": output[call.output_sent :],
                        }
                    },
                )
            )
            call.output_sent = len(output)
        return updates

    def _announce(
        self,
        step: StepUpdate,
        name: str,
        params: dict[str, Any] | None,
        seen: Observation,
        updates: list[models.SessionUpdate],
    ) -> _Call:
        desc = describe_tool(name, params, self.cwd)
        call_id = f"{self.call_prefix}-{step.step_index}"
        terminal_id = call_id if self.terminals and desc.kind == "execute" else None
        call = _Call(call_id, name, desc.title, params, terminal_id, desc.kind)
        self.calls[step.step_index] = call
        if desc.kind == "execute":
            self._open_commands[step.step_index] = call
        self._note_before(call, seen)
        meta = None
        content: list[models.ToolCallContent] | None = None
        if terminal_id is not None:
            meta = {"terminal_info": {"terminal_id": terminal_id, "cwd": self.cwd}}
            content = [models.TerminalContent(terminal_id=terminal_id)]
        updates.append(
            models.ToolCall(
                tool_call_id=call_id,
                title=desc.title,
                kind=desc.kind,
                status="in_progress",
                content=content,
                locations=list(desc.locations) or None,
                raw_input=params if params is not None else {},
                meta=meta,
            )
        )
        return call

    def _note_before(self, call: _Call, seen: Observation) -> None:
        target = edit_target(call.name, call.params)
        if call.before is _UNREAD and target is not None and target in seen.files:
            call.before = seen.files[target]

    def _completed(
        self, call: _Call, output: str | None, seen: Observation
    ) -> models.ToolCallUpdate:
        call.finished, call.status = True, "completed"
        call.had_output = bool(output)
        content: list[models.ToolCallContent] = []
        if call.background and not output:
            content.append(text_content(BACKGROUND_DONE))
        meta: dict[str, Any] | None = None
        target = edit_target(call.name, call.params)
        diff = self._diff(call, target, seen)
        if diff is not None:
            content.append(diff)
        if call.terminal_id is not None:
            content.insert(0, models.TerminalContent(terminal_id=call.terminal_id))
            meta = {
                "terminal_output": {
                    "terminal_id": call.terminal_id,
                    "data": (output or "")[call.output_sent :],
                },
                # agy reports no exit code for commands (hooks-and-tools.md §B2).
                "terminal_exit": {
                    "terminal_id": call.terminal_id,
                    "exit_code": None,
                    "signal": None,
                },
            }
            if not output:
                del meta["terminal_output"]
        elif output and diff is None:
            # agy's commands print CRLF line ends (contract.md §3.4): not in Markdown.
            content.append(text_content(fenced(capped(output.replace("\r\n", "\n")))))
        for image in seen.images.values():
            content.append(
                models.ContentToolCallContent(
                    models.ImageContent(data=image.data, mime_type=image.mime_type)
                )
            )
        content += [text_content(f"Image {p} not shown: {why}.") for p, why in seen.refused.items()]
        if seen.refused:  # the first refused image names the cause (the card has one _meta)
            path = next(iter(seen.refused))
            meta = {**(meta or {}), **causes.meta("image_other_conversation", path=path)}
        return models.ToolCallUpdate(
            tool_call_id=call.call_id,
            status="completed",
            content=content or None,
            raw_output={"output": output} if output is not None else None,
            meta=meta,
        )

    def _diff(
        self, call: _Call, target: str | None, seen: Observation
    ) -> models.DiffContent | None:
        if target is None or call.before is _UNREAD or target not in seen.files:
            return None
        after = seen.files[target]
        before = call.before
        if after is None or before == after:
            return None
        assert before is None or isinstance(before, str)
        return models.DiffContent(path=target, old_text=before, new_text=after)

    def _failed(self, call: _Call, step: StepUpdate) -> models.ToolCallUpdate:
        call.finished, call.status = True, "failed"
        info = step.tool_info
        error = info.error.message if info and info.error and info.error.message else None
        message = error or "the tool failed"
        permission = blocked.checked_permission(error)
        cause = None
        if permission:  # agy 1.2.x names the permission on the step itself
            call.blocked = permission
            rule = blocked.rule_for(permission, call.params)
            message += "\n\n" + blocked.blocked_card_text(permission, rule)
            cause = causes.meta("policy_blocked", permission=permission, allowRule=rule)
        elif error is not None and error.startswith(HOOK_DENIAL):
            cause = causes.meta("hook_denied", tool=call.name)
        return models.ToolCallUpdate(
            tool_call_id=call.call_id,
            status="failed",
            content=[text_content(message)],
            raw_output={"error": {"type": info.error.type, "message": error}}
            if info and info.error
            else None,
            meta=_exit_meta(call, cause),
        )

    def announce_pending(
        self,
        step_index: int,
        name: str,
        args: dict[str, Any],
        proposal: models.DiffContent | None,
    ) -> tuple[str, list[models.SessionUpdate], models.ToolCallUpdate]:
        """A permission is about to be asked for this step (the hook call):
        make sure the client knows the call, as pending, with the full
        arguments and the proposed diff.

        Returns the call id, the updates to send first, and the ``toolCall``
        of the permission request. Works whether or not the stream's ACTIVE
        line for the step has arrived yet (two pipes race).
        """
        desc = describe_tool(name, args, self.cwd)
        call = self.calls.get(step_index)
        first_sight = call is None
        if call is None:
            call_id = f"{self.call_prefix}-{step_index}"
            # The hook may be first to name a command: it gets its terminal here.
            terminal_id = call_id if self.terminals and desc.kind == "execute" else None
            call = _Call(call_id, name, desc.title, args, terminal_id, desc.kind)
            self.calls[step_index] = call
            if desc.kind == "execute":
                self._open_commands[step_index] = call
        call.title, call.kind, call.params, call.gated = desc.title, desc.kind, args, True
        fields: dict[str, Any] = {
            "tool_call_id": call.call_id,
            "title": desc.title,
            "kind": desc.kind,
            "status": "pending",
            "content": [proposal] if proposal else None,
            "locations": list(desc.locations) or None,
            "raw_input": args,
        }
        request = models.ToolCallUpdate(**fields)
        if not first_sight:
            return call.call_id, [request], request
        if call.terminal_id is not None:
            fields["content"] = [
                *(fields["content"] or []),
                models.TerminalContent(terminal_id=call.terminal_id),
            ]
            fields["meta"] = {"terminal_info": {"terminal_id": call.terminal_id, "cwd": self.cwd}}
        return call.call_id, [models.ToolCall(**fields)], request

    def finish_question(
        self, step_index: int, answer: str, cause: dict[str, Any] | None = None
    ) -> list[models.SessionUpdate]:
        """agy's question on this step was put to the user: its card is done,
        showing the answer (agy's own end of the step, a hook denial, is not news);
        ``cause``: the catalogue's ``_meta`` when no answer came."""
        call = self.calls.get(step_index)
        if call is None or call.finished:
            return []
        call.finished, call.status = True, "completed"
        return [
            models.ToolCallUpdate(
                tool_call_id=call.call_id,
                status="completed",
                content=[text_content(answer)],
                meta=cause,
            )
        ]

    def mark_gated(self, step_index: int) -> None:
        """The hook gate decided this step without asking the user."""
        call = self.calls.get(step_index)
        if call is not None:
            call.gated = True
        else:
            self._gated_early.add(step_index)

    def ungated_finished(self) -> list[str]:
        """Titles of finished tool steps that never went through the gate (a step
        agy's own policy blocked did not run)."""
        return [
            c.title
            for index, c in self.calls.items()
            if c.finished and not c.gated and index not in self._gated_early and not c.blocked
        ]

    @property
    def watching(self) -> bool:
        """Some tool's card depends on what step comes next (:meth:`before_step`)."""
        return bool(self._held or self._open_commands)

    def before_step(self, step_index: int) -> list[models.SessionUpdate]:
        """Another step came: a step held at DONE without output was no 1.3.x soft-deny
        (agy ends the turn at the blocked tool), so it completed; commands still
        running were left to run in the background, and their cards say so."""
        updates = self.release_held()
        for index, call in list(self._open_commands.items()):
            if call.finished:
                del self._open_commands[index]
            elif index < step_index and not call.background:
                call.background = True
                content: list[models.ToolCallContent] = [text_content(BACKGROUND_RUNNING)]
                if call.terminal_id is not None:
                    content.insert(0, models.TerminalContent(terminal_id=call.terminal_id))
                updates.append(models.ToolCallUpdate(tool_call_id=call.call_id, content=content))
        return updates

    def release_held(self) -> list[models.SessionUpdate]:
        """Another event came: the held steps were not the blocked one; they completed."""
        updates: list[models.SessionUpdate] = []
        for index, seen in self._held.items():
            updates.append(self._completed(self.calls[index], None, seen))
        self._held.clear()
        return updates

    def finished_steps(self) -> list[blocked.StepSeen]:
        """The finished steps, in order, for :func:`blocked.tie`."""
        return [
            blocked.StepSeen(
                index, c.name, c.title, c.had_output or c.background, c.status == "failed"
            )
            for index, c in sorted(self.calls.items())
            if c.finished
        ]

    def block_denied(self, denied: list[str]) -> tuple[list[models.SessionUpdate], dict[str, str]]:
        """Fail the steps the turn's denials tie to (:func:`blocked.tie`; a 1.2.x step
        that named its permission is tied already); returns the updates and the
        permissions left untied, with why."""
        already = self.blocked_titles()
        tie = blocked.tie(self.finished_steps(), [p for p in denied if p not in already])
        return [self.block(index, p) for index, p in tie.blocked.items()], dict(tie.untied)

    def blocked_titles(self) -> dict[str, list[str]]:
        """Titles of the blocked steps' cards, by permission."""
        titles: dict[str, list[str]] = {}
        for call in self.calls.values():
            if call.blocked is not None:
                titles.setdefault(call.blocked, []).append(call.title)
        return titles

    def block(self, step_index: int, permission: str) -> models.ToolCallUpdate:
        """agy's policy blocked this step (1.3.x: it ended DONE without output)."""
        call = self.calls[step_index]
        self._held.pop(step_index, None)
        call.finished, call.status, call.blocked = True, "failed", permission
        rule = blocked.rule_for(permission, call.params)
        return models.ToolCallUpdate(
            tool_call_id=call.call_id,
            status="failed",
            content=[text_content(blocked.blocked_card_text(permission, rule))],
            raw_output={
                "error": {"type": "PERMISSION_DENIED", "permission": permission, "allowRule": rule}
            },
            meta=_exit_meta(
                call, causes.meta("policy_blocked", permission=permission, allowRule=rule)
            ),
        )

    def fail_unfinished(self, reason: str) -> list[models.SessionUpdate]:
        """Mark calls still running as failed (the turn ended under them); a
        question of agy's still open was not answered (its deadline passed)."""
        updates: list[models.SessionUpdate] = []
        for call in self.calls.values():
            if not call.finished:
                call.finished, call.status = True, "failed"
                question = call.name == QUESTION_TOOL
                updates.append(
                    models.ToolCallUpdate(
                        tool_call_id=call.call_id,
                        status="failed",
                        content=[text_content(reason)],
                        meta=unanswered_meta(call.title) if question else None,
                    )
                )
        return updates

"""The turn's plan: agy's plan-like tools, subagents and background work as one ACP plan (pure).

ACP's ``plan`` update carries the whole plan each time, so :class:`TurnPlan`
keeps one entry per key and sends them all when an entry changes (nothing
when it does not). Entries come from agy's plan and background-work tools
(``tools.PLAN_TOOLS``: ``invoke_subagent``, ``task_boundary``,
``manage_task``, ``schedule``...), from ``subagent`` steps and from agy's
stderr lines about background tasks; when the turn ends, entries still in
progress are completed. It changes with agy's vocabulary for such work,
which the rest of the mapper does not see.
"""

from __future__ import annotations

import re

import attrs

from ..acp import models
from ..agy import events
from . import ext_events
from .tools import PLAN_TOOLS

_BACKGROUND = re.compile(r"(waiting up to \S+ for|terminating) (?P<n>\d+) background task")


@attrs.define
class TurnPlan:
    """One turn's plan entries by key; see the module docstring."""

    entries: dict[str, models.PlanEntry] = attrs.Factory(dict)
    #: Keys of the subagent entries whose return has not been seen yet.
    _subagents_out: set[str] = attrs.Factory(set)
    #: Add the subagent extension events (ext_events.py) to the updates.
    extension_events: bool = False
    #: Each subagent's name by entry key (the key is its ``invocationId``).
    _subagent_names: dict[str, str] = attrs.Factory(dict)

    def set(self, key: str, content: str, status: str) -> list[models.SessionUpdate]:
        entry = models.PlanEntry(content=content, priority="medium", status=status)
        if self.entries.get(key) == entry:
            return []
        self.entries[key] = entry
        return [models.Plan(entries=list(self.entries.values()))]

    def from_tool(self, step: events.StepUpdate) -> list[models.SessionUpdate]:
        info = step.tool_info
        name = step.tool_name or (info.name if info else None)
        if name not in PLAN_TOOLS:
            return []
        params = (info.parameters if info else None) or {}
        status = "in_progress" if step.state == events.STATE_ACTIVE else "completed"
        if name == "invoke_subagent":
            subagents = params.get("Subagents")
            found = [
                (sub.get("Role") or sub.get("TypeName"), sub.get("Prompt"))
                for sub in (subagents if isinstance(subagents, list) else [])
                if isinstance(sub, dict)
            ]
            return self._subagents(step, found)
        if name == "task_boundary":
            text = str(params.get("TaskName") or params.get("TaskSummary") or "Task")
            task_status = str(params.get("TaskStatus") or "")
            return self.set(
                f"task:{text}", text + (f" — {task_status}" if task_status else ""), status
            )
        if name == "manage_task":
            action = str(params.get("Action") or "manage")
            task = str(params.get("TaskId") or "")
            return self.set(
                f"bg:{task or step.step_index}",
                f"Background task {task}: {action}" if task else f"Background task: {action}",
                status,
            )
        if name == "schedule":
            scheduled = str(params.get("Prompt") or "scheduled work").strip()
            return self.set(str(step.step_index), f"Scheduled: {scheduled[:120]}", "pending")
        return self.set(str(step.step_index), name.replace("_", " ").capitalize(), status)

    def from_subagents(self, step: events.StepUpdate) -> list[models.SessionUpdate]:
        info = step.subagent_info or {}
        subagents = info.get("subagents")
        found = [
            (sub.get("role") or sub.get("type_name"), sub.get("initial_prompt"))
            for sub in (subagents if isinstance(subagents, list) else [])
            if isinstance(sub, dict)
        ]
        return self._subagents(step, found)

    def _subagents(
        self, step: events.StepUpdate, found: list[tuple[object, object]]
    ) -> list[models.SessionUpdate]:
        """Entries for the subagents a step spawns: its role and initial prompt. agy
        ends the spawning step ~0.5 s after the spawn while the subagent still works
        (contract.md §11), so the entry stays in progress until its return is seen
        (:meth:`subagents_returned`) or the turn ends; a step that failed ends it."""
        status = "completed" if step.state == events.STATE_ERROR else "in_progress"
        updates: list[models.SessionUpdate] = []
        for i, (role, prompt) in enumerate(found or [(None, None)]):
            key = f"{step.step_index}.{i}"
            lines = str(prompt or "").strip().splitlines()
            text = f"Subagent {role or 'subagent'}" + (f": {lines[0][:120]}" if lines else "")
            if not found and key in self.entries:
                text = self.entries[key].content
            elif not found:
                text = "Run subagent"
            if status == "in_progress":
                self._subagents_out.add(key)
            else:
                self._subagents_out.discard(key)
            updates += self.set(key, text, status)
            if self.extension_events:
                updates += self._subagent_events(key, role, prompt, step.step_index, status)
        return updates

    def _subagent_events(
        self, key: str, role: object, prompt: object, step_index: int, status: str
    ) -> list[models.SessionUpdate]:
        """The start of a subagent first seen, or the end of one whose step failed."""
        name = self._subagent_names.get(key)
        if name is None:
            name = self._subagent_names[key] = str(role or "subagent")
            started = ext_events.sub_agent_started(
                key, name, str(prompt) if prompt else None, step_index
            )
            if status == "in_progress":
                return [started]
            return [started, ext_events.sub_agent_finished(key, name, "failed")]
        if status == "in_progress":
            return []
        return [ext_events.sub_agent_finished(key, name, "failed")]

    def _subagents_over(self, keys: list[str], how: str) -> list[models.SessionUpdate]:
        if not self.extension_events:
            return []
        return [ext_events.sub_agent_finished(k, self._subagent_names[k], how) for k in keys]

    def subagents_returned(self) -> list[models.SessionUpdate]:
        """agy marks a subagent's return with a ``system_message`` step: the
        subagents still out are done."""
        updates: list[models.SessionUpdate] = []
        returned = sorted(self._subagents_out)
        for key in returned:
            entry = self.entries[key]
            updates += self.set(key, entry.content, "completed")
        self._subagents_out.clear()
        # Each plan update carries the whole plan: the last says it all.
        return [*updates[-1:], *self._subagents_over(returned, "returned")]

    def from_stderr(self, text: str) -> list[models.SessionUpdate]:
        """agy's stderr says it waits for (or ends) background tasks."""
        match = _BACKGROUND.search(text)
        if match:
            count = int(match.group("n"))
            status = "completed" if text.startswith("terminating") else "in_progress"
            return self.set("background", f"Background work: {count} task(s)", status)
        return []

    def finish(self) -> list[models.SessionUpdate]:
        """The turn ended: entries still in progress are completed."""
        over = self._subagents_over(sorted(self._subagents_out), "turnEnded")
        self._subagents_out.clear()
        return [*self._completed(), *over]

    def _completed(self) -> list[models.SessionUpdate]:
        if self.entries:
            done = [
                attrs.evolve(e, status="completed") if e.status == "in_progress" else e
                for e in self.entries.values()
            ]
            if done != list(self.entries.values()):
                self.entries = dict(zip(self.entries, done, strict=True))
                return [models.Plan(entries=done)]
        return []

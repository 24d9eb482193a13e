"""What the session must read before an event is mapped (pure): the target of
an edit (its content before agy changes it) and the image files agy's output
names (inlined once each). The mapper asks; the session reads
(workspace/reads.py) and hands the results back as an ``Observation``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import attrs

from ..agy import events
from .images import image_candidates
from .streamed import LineScan
from .tools import edit_target

#: What most events need read: nothing (shared, never mutated).
NOTHING_TO_READ: tuple[Sequence[str], Sequence[str]] = ((), ())


@attrs.define
class ReadNeeds:
    """One turn's reads (see the module docstring)."""

    cwd: str
    #: Image paths named by each agent_response step so far.
    _step_scans: dict[int, LineScan] = attrs.Factory(dict)
    #: Images already inlined this turn (a tool output and the reply often
    #: name the same file).
    _images_shown: set[str] = attrs.Factory(set)

    def scan_text(self, step_index: int, text: str) -> None:
        """A text delta of an agent_response step (its image paths span deltas)."""
        scan = self._step_scans.get(step_index)
        if scan is None:
            scan = self._step_scans[step_index] = LineScan(self.cwd)
        scan.add(text)

    def shown(self, images: Iterable[str]) -> None:
        """These images were inlined: not read again this turn."""
        self._images_shown.update(images)

    def paths_to_read(
        self, event: events.AgyEvent | events.MalformedLine
    ) -> tuple[Sequence[str], Sequence[str]]:
        """(files to read as text, image candidates) for ``event``."""
        step_class = events.StepUpdateEvent  # its exact type first: no isinstance call
        if type(event) is not step_class and not isinstance(event, step_class):
            return NOTHING_TO_READ
        step = event.step_update
        if step.step_type == "tool":
            files, images = self._tool_paths(step)
        elif step.step_type == "agent_response" and step.state == events.STATE_DONE:
            files, images = [], self._response_images(step)
        else:
            return NOTHING_TO_READ  # e.g. a text delta still streaming
        if images:
            images = [path for path in images if path not in self._images_shown]
        return files, images

    def _tool_paths(self, step: events.StepUpdate) -> tuple[list[str], list[str]]:
        info = step.tool_info
        name = step.tool_name or (info.name if info else "") or ""
        target = edit_target(name, info.parameters if info else None)
        files = [target] if target else []
        images: list[str] = []
        if step.state == events.STATE_DONE and info and info.output:
            images = image_candidates(info.output, self.cwd)
        if step.state == events.STATE_DONE and name == "generate_image" and info:
            images += image_candidates(json.dumps(info.parameters or {}), self.cwd)
        return files, images

    def _response_images(self, step: events.StepUpdate) -> list[str]:
        scan = self._step_scans.get(step.step_index)
        if scan is None:
            return image_candidates(step.text_delta or "", self.cwd)
        return scan.candidates(step.text_delta or "")

"""Root-checked reads of the session's files (blocking: run in a worker thread).

``read_image`` resolves a path and returns the image only if its real path lies
inside the session's roots or this session's own agy conversation folder
(``brain/<conversation>/``, where agy writes generated images: ``agy/state.py``),
it is at most 2 MiB and its bytes are really an image of a known type (magic
numbers decide, not the extension); symlinks and ``..`` leading out are
resolved first, so they are refused. Another conversation's folder is never
read, and the log says why. ``read_text_file`` and
``snapshot_edit_target`` read the text an edit's diff is made from.
"""

from __future__ import annotations

import base64
import logging
import os
import stat
from collections.abc import Callable, Iterable, Sequence

import attrs
import trio

from ..agy.events import STATE_ACTIVE, StepUpdateEvent
from ..media import sniff_image_type
from ..translate.observation import NO_OBSERVATION, ImageData, Observation
from ..translate.tools import edit_target

logger = logging.getLogger(__name__)

MAX_INLINE_IMAGE_BYTES = 2 * 2**20  # 2 MiB


def _inside(path: str, roots: Sequence[str]) -> bool:
    for root in roots:
        real_root = os.path.realpath(root)
        if path == real_root or path.startswith(real_root.rstrip(os.sep) + os.sep):
            return True
    return False


def _as_tuple(roots: Iterable[str]) -> tuple[str, ...]:
    return tuple(roots)


@attrs.frozen
class ImageScope:
    """Where an image may be read from.

    Attributes:
      roots: the session's folders (cwd, additional directories, staging).
      conversation: this session's agy conversation folder (``brain/<id>/``),
        once agy has said which conversation it is.
      brain: the folder holding every conversation's folder: a path below it
        but outside ``conversation`` belongs to another conversation.
    """

    roots: tuple[str, ...] = attrs.field(converter=_as_tuple)
    conversation: str | None = None
    brain: str | None = None

    def refusal(self, real: str) -> tuple[int, str] | None:
        """Why the image at the resolved path ``real`` may not be read, with
        the log level that deserves; None if it may."""
        if _inside(real, self.roots):
            return None
        if self.conversation is not None and _inside(real, (self.conversation,)):
            return None
        if self.brain is not None and _inside(real, (self.brain,)):
            own = self.conversation or "not known yet"
            # Worth a warning: agy named a file of a conversation this session is not.
            return logging.WARNING, (
                "it is in another agy conversation's folder; only this session's "
                f"conversation folder ({own}) is shown"
            )
        return logging.INFO, "it is outside the session's folders"


def read_image(path: str, scope: ImageScope) -> ImageData | None:
    """The image at ``path`` if it is safe to inline (blocking I/O)."""
    return inspect_image(path, scope)[0]


def inspect_image(path: str, scope: ImageScope) -> tuple[ImageData | None, str | None]:
    """:func:`read_image`, and why it is not shown when the user should be told
    (a refusal worth a warning: another agy conversation's folder)."""
    real = os.path.realpath(path)
    refusal = scope.refusal(real)
    if refusal is not None:
        level, why = refusal
        logger.log(level, "image %s (resolved: %s) not shown: %s", path, real, why)
        return None, why if level >= logging.WARNING else None
    try:
        data = _read_regular(real, MAX_INLINE_IMAGE_BYTES)
    except (OSError, ValueError):
        return None, None
    if not data or len(data) > MAX_INLINE_IMAGE_BYTES:
        return None, None
    mime = sniff_image_type(data)
    if mime is None:
        return None, None
    return ImageData(mime_type=mime, data=base64.b64encode(data).decode("ascii")), None


MAX_DIFF_FILE_BYTES = 1 * 2**20  # 1 MiB: larger files get no diff


def _read_regular(path: str, limit: int) -> bytes:
    """The bytes of the regular file at ``path`` (at most ``limit``).

    Opened without blocking and refused unless regular: a FIFO would block
    the open until a writer comes, a device such as /dev/zero never ends
    (its size reads 0).

    Raises:
        OSError: it cannot be opened (FileNotFoundError: it does not exist).
        ValueError: it is not a regular file, or larger than ``limit``.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file")
        if info.st_size > limit:
            raise ValueError("too large")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise ValueError("too large")
    return data


def read_text_file(path: str) -> str | None:
    """The file's text; None if it does not exist. Raises ValueError when it
    exists but cannot be shown as a diff (binary, huge, unreadable)."""
    try:
        data = _read_regular(path, MAX_DIFF_FILE_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(str(exc)) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None


def observe(files: Sequence[str], images: Sequence[str], scope: ImageScope) -> Observation:
    """Read what the mapper asked for (blocking: run in a worker thread)."""
    texts: dict[str, str | None] = {}
    for path in files:
        try:
            texts[path] = read_text_file(path)
        except ValueError:
            continue  # unknown content: no diff rather than a wrong one
    found, refused = {}, {}
    for path in images:
        image, why = inspect_image(path, scope)
        if image is not None:
            found[path] = image
        elif why is not None:
            refused[path] = why
    return Observation(files=texts, images=found, refused=refused)


def snapshot_edit_target(event: object) -> dict[str, str | None] | None:
    """The text of the file an ACTIVE edit step is about to change (blocking,
    but bounded: at most MAX_DIFF_FILE_BYTES read).

    Called as each agy line is read, before agy has had time to write: the
    "before" side of the edit's diff (hooks-and-tools.md §B4).
    """
    if not isinstance(event, StepUpdateEvent):
        return None
    step = event.step_update
    if step.step_type != "tool" or step.state != STATE_ACTIVE or step.tool_info is None:
        return None
    target = edit_target(step.tool_name or step.tool_info.name or "", step.tool_info.parameters)
    if target is None:
        return None
    try:
        return {target: read_text_file(target)}
    except ValueError:
        return None


async def observe_for(
    files: Sequence[str],
    images: Sequence[str],
    attachment: object,
    scope: Callable[[], ImageScope],
) -> Observation:
    """Read the ``files`` and ``images`` an event names (``paths_to_read``
    of its mapper's ``needs``; in a worker thread); edit targets snapshotted as the line
    was read come as its ``attachment``."""
    early = attachment if isinstance(attachment, dict) else {}
    files = [path for path in files if path not in early]
    seen = NO_OBSERVATION
    if files or images:
        seen = await trio.to_thread.run_sync(observe, files, images, scope())
    if early:
        seen = attrs.evolve(seen, files={**seen.files, **early})
    return seen

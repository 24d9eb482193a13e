"""What a turn has streamed, kept in bounded memory (pure).

A turn of 100k text deltas must not keep 100k strings. :class:`StreamedText`
keeps counts, a digest, and a bounded head and tail of agy's deltas: enough
to decide whether ``result.response`` extends what was shown (contract.md
§3.6), and to give the journal the turn's final text once — the response
itself when it extends the deltas, which is agy's normal case.
:class:`LineScan` finds the image paths named in a step's text as it streams:
no path spans a line break, so completed lines are scanned and dropped, and
only the unfinished line is kept (trimmed at whitespace when it grows long).
"""

from __future__ import annotations

import hashlib

from .images import MAX_CANDIDATES, image_candidates

#: agy's deltas kept verbatim, for a journal the response cannot stand in for
#: (a cancelled or failed turn): the first and the last half of this.
KEEP_CHARS = 2**16
#: An unfinished line longer than this is scanned up to its last whitespace.
SCAN_LINE_CHARS = 2**14


def _digest_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _digest(text: str, start: int, stop: int) -> bytes:
    """The middle digest of ``text[start:stop]``, hashed a window at a time
    (no copy of a long turn's text)."""
    digest = hashlib.blake2b(digest_size=16)
    for at in range(start, stop, _DIGEST_WINDOW):
        digest.update(_digest_bytes(text[at : min(at + _DIGEST_WINDOW, stop)]))
    return digest.digest()


_DIGEST_WINDOW = 2**16


class StreamedText:
    """Everything a turn showed as agent text: agy's deltas, then what came
    after them (the rest of the response, the bridge's own messages).

    The deltas are kept as a head (the first half of ``keep_chars``), a tail
    (the last half or so) and, for what fell out between them, a length and
    a digest, fed in bulk when the tail has grown to twice its size."""

    def __init__(self, keep_chars: int = KEEP_CHARS) -> None:
        self._half = max(1, keep_chars // 2)
        #: Characters of agy's deltas.
        self.delta_chars = 0
        #: Something other than whitespace was shown.
        self.visible = False
        self._head: list[str] = []
        self._head_chars = 0
        self._middle = hashlib.blake2b(digest_size=16)
        self._middle_chars = 0
        self._tail: list[str] = []
        self._tail_chars = 0
        self._after: list[str] = []
        #: The response whose first ``delta_chars`` characters are the deltas.
        self._restated: str | None = None

    def add_delta(self, text: str) -> None:
        size = len(text)
        self.delta_chars += size
        if not self.visible and text and not text.isspace():
            self.visible = True
        if self._head_chars < self._half and not self._tail:
            self._head.append(text)
            self._head_chars += size
            return
        self._tail.append(text)
        self._tail_chars += size
        if self._tail_chars > 2 * self._half:
            self._shed()

    def _shed(self) -> None:
        """Move the tail's oldest parts into the middle digest, keeping ~half."""
        keep = self._tail_chars
        cut = 0
        while keep - len(self._tail[cut]) >= self._half:
            keep -= len(self._tail[cut])
            cut += 1
        dropped = "".join(self._tail[:cut])
        del self._tail[:cut]
        self._tail_chars = keep
        self._middle.update(_digest_bytes(dropped))
        self._middle_chars += len(dropped)

    def add_after(self, text: str) -> None:
        if not self.visible and text and not text.isspace():
            self.visible = True
        self._after.append(text)

    def last_chars(self, count: int) -> str:
        """The last ``count`` characters shown (fewer if less was shown): worked
        out when asked, so streaming keeps no running tail."""
        parts: list[str] = []
        size = 0
        for part in (*reversed(self._after), *reversed(self._tail), *reversed(self._head)):
            parts.append(part)
            size += len(part)
            if size >= count:
                break
        return "".join(reversed(parts))[-count:] if parts else ""

    @property
    def truncated(self) -> bool:
        return self._middle_chars > 0

    def rest_of(self, response: str) -> str | None:
        """What ``response`` adds to the deltas, if it starts with them (else None)."""
        count = self.delta_chars
        if len(response) < count:
            return None
        head, middle = self._head_chars, self._middle_chars
        same = (
            response[:head] == "".join(self._head)
            and response[head + middle : count] == "".join(self._tail)
            and (not middle or _digest(response, head, head + middle) == self._middle.digest())
        )
        if not same:
            return None
        self._restated = response
        return response[count:]

    @property
    def text(self) -> str:
        """The turn's text as shown (the deltas' middle elided if it was not
        kept and no response restated it)."""
        if self._restated is not None:
            deltas = self._restated[: self.delta_chars]
        elif self.truncated:
            deltas = (
                "".join(self._head)
                + f"\n\n[… {self._middle_chars} characters not kept in the history …]\n\n"
                + "".join(self._tail)
            )
        else:
            deltas = "".join(self._head) + "".join(self._tail)
        return deltas + "".join(self._after)


class LineScan:
    """Image paths named in one step's text (``image_candidates`` of all of
    it, in order, at most ``MAX_CANDIDATES``), found as the text streams."""

    def __init__(self, cwd: str, line_chars: int = SCAN_LINE_CHARS) -> None:
        self._cwd = cwd
        self._line_limit = line_chars
        self.found: list[str] = []
        #: ``found`` has MAX_CANDIDATES paths (a flag: tested for every delta).
        self._full = False
        self._line: list[str] = []
        self._line_chars = 0

    def add(self, text: str) -> None:
        if self._full:
            return
        cut = text.rfind("\n")
        if cut < 0:
            self._line.append(text)
            self._line_chars += len(text)
            if self._line_chars > self._line_limit:
                self._trim()
            return
        self._merge("".join(self._line) + text[: cut + 1])
        rest = text[cut + 1 :]
        self._line = [rest] if rest else []
        self._line_chars = len(rest)

    def candidates(self, more: str = "") -> list[str]:
        """What the text so far plus ``more`` names (nothing is kept)."""
        found = list(self.found)
        if len(found) < MAX_CANDIDATES:
            for path in image_candidates("".join(self._line) + more, self._cwd):
                if path not in found:
                    found.append(path)
        return found[:MAX_CANDIDATES]

    def _merge(self, text: str) -> None:
        for path in image_candidates(text, self._cwd):
            if path not in self.found and len(self.found) < MAX_CANDIDATES:
                self.found.append(path)
        self._full = len(self.found) >= MAX_CANDIDATES

    def _trim(self) -> None:
        line = "".join(self._line)
        # Bare paths hold no whitespace: what follows the last one may be a
        # path still streaming, everything before it can be scanned now.
        cut = max(line.rfind(" "), line.rfind("\t")) + 1
        if cut == 0 or len(line) - cut > self._line_limit // 2:
            cut = len(line)  # one huge token: no path, drop it
        self._merge(line[:cut])
        rest = line[cut:]
        self._line = [rest] if rest else []
        self._line_chars = len(rest)


class HeldAnswer:
    """agy's text under ``--json-schema``, held while it may be the JSON answer line
    (agy's internal keys and all, contract.md §11): the clean object is shown instead."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def offer(self, text: str) -> str | None:
        """None while held; once the text cannot be the JSON line, all of it."""
        self._parts.append(text)
        held = "".join(self._parts)
        if not held.strip() or held.lstrip().startswith("{"):
            return None
        self._parts = []
        return held

    def take(self) -> str:
        """What is held (and hold nothing more)."""
        held, self._parts = "".join(self._parts), []
        return held

"""The texts tool cards and messages show (pure): fenced output, capped content.

Shared by the tool calls, the turn mapper and the bridge's own commands; each knows what
to say, this module how it is laid out.
"""

from __future__ import annotations

from ..acp import models

#: Tool output shown as card content is capped (the full text stays in
#: rawOutput): editors render huge blocks badly, and one line of the wire
#: should stay far below the clients' line limits.
MAX_CONTENT_CHARS = 256 * 1024

#: What a backgrounded command's card says while it runs, and when it ends without output.
BACKGROUND_RUNNING = (
    "Running in the background: agy went on without waiting for this command; "
    "its output reaches agy when it finishes."
)
BACKGROUND_DONE = (
    "Finished in the background; agy received its output separately (not shown on this card)."
)


def capped(text: str) -> str:
    if len(text) <= MAX_CONTENT_CHARS:
        return text
    dropped = len(text) - MAX_CONTENT_CHARS
    return text[:MAX_CONTENT_CHARS] + f"\n… ({dropped} more characters in rawOutput)"


def fenced(text: str, info: str = "") -> str:
    """``text`` in a Markdown code fence longer than any backtick run inside it."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip(chr(10))}\n{fence}"


def text_content(text: str) -> models.ContentToolCallContent:
    return models.ContentToolCallContent(models.TextContent(text=text))

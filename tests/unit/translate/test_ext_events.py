"""A turn's warnings as ACP ``notice`` updates, and their ``_agybridge/*`` events
(translate/ext_events.py), fed through the mapper as the session feeds it."""

from __future__ import annotations

from agybridge.acp import models

from ...acp_wire import assert_updates_valid
from ...extension_schema import check_notification
from .test_mapper_more import mapper, result, tool


def test_tools_past_the_gate_are_a_warning_notice_and_event() -> None:
    """A tool step the permission gate never saw: a ``notice`` (warning, with the
    step named) instead of chat text, and a ``gate_bypassed`` warning event."""
    turn = mapper(gate_active=True, show_notices=True, extension_events=True)
    updates = [
        *turn.feed(tool(3, "DONE", "view_file", {"AbsolutePath": "/work/a.txt"})),
        *turn.feed(result()),
    ]
    assert_updates_valid([u for u in updates if not isinstance(u, models.ExtensionEvent)])
    [notice] = [u for u in updates if isinstance(u, models.Notice)]
    assert (notice.severity, notice.title) == (
        "warning",
        "agy ran tools without going through the permission gate",
    )
    assert notice.description is not None and "without going through" in notice.description
    assert not [u for u in updates if isinstance(u, models.AgentMessageChunk)]
    [warning] = [
        u for u in updates if isinstance(u, models.ExtensionEvent) and "warning" in u.method
    ]
    check_notification(warning.method, {"sessionId": "s", **warning.params})
    assert warning.params == {"code": "gate_bypassed", "message": notice.description}


def test_without_notices_the_same_warning_is_chat_text() -> None:
    """The default: the warning is a ⚠️ paragraph of the chat, and no event."""
    turn = mapper(gate_active=True)
    updates = [
        *turn.feed(tool(3, "DONE", "view_file", {"AbsolutePath": "/work/a.txt"})),
        *turn.feed(result()),
    ]
    [chunk] = [u for u in updates if isinstance(u, models.AgentMessageChunk)]
    assert isinstance(chunk.content, models.TextContent)
    assert chunk.content.text.startswith("⚠️ agy ran `")
    assert not [u for u in updates if isinstance(u, models.Notice | models.ExtensionEvent)]

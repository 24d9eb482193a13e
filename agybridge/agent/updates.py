"""``session/update`` notifications as wire bytes, a batch at a time.

A session's outlet hands its client a batch of updates (one read of agy's
output, mapped in one step); they are encoded here and handed to the peer's
writer as one item: one task switch and one write for the batch.

Text chunks are most of a turn's updates, and every turn also sends a
session info update (``updatedAt``) and a usage update: they have a fast
path that writes their bytes without the converter. The general path stays
the one source of truth for the shape: a generated-input test compares both,
byte for byte.
"""

from __future__ import annotations

import json.encoder
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..acp import codec, models
from ..acp.chunks import plain_text_chunk
from ..jsonrpc.messages import encode_message, notification_message

_METHOD = "session/update"
_TAILS: dict[type[Any], bytes] = {
    models.AgentMessageChunk: b'"agent_message_chunk"}}}\n',
    models.AgentThoughtChunk: b'"agent_thought_chunk"}}}\n',
    models.UserMessageChunk: b'"user_message_chunk"}}}\n',
}
# json.dumps of one str, as the general encoder writes it (UTF-8, not \u-escaped):
# what ``JSONEncoder(ensure_ascii=False).encode`` does for a str, without its checks.
_dump_str = json.encoder.encode_basestring


def encode_update(session_id: str, update: models.SessionUpdate) -> bytes:
    """One ``session/update`` notification line for ``update``."""
    return encode_updates(session_id, (update,))


def encode_updates(
    session_id: str, updates: Sequence[models.SessionUpdate], *, extensions: bool = False
) -> bytes:
    """The notification lines of ``updates``, in order. The session's parts
    are looked up once a batch, a message's once a run of its chunks.
    ``extensions``: the client asked for the ``_agybridge/*`` notifications
    (:class:`~agybridge.acp.models.ExtensionEvent`); else they are left out."""
    try:
        params_head, head = _session_heads.get(session_id) or _session_head(session_id)
    except UnicodeEncodeError:  # a lone surrogate: the general path escapes the id
        return b"".join([_encode_other(session_id, update, extensions) for update in updates])
    parts: list[bytes] = []
    message_id: str | None = None
    middle = _NO_MESSAGE_ID
    for update in updates:
        plain = plain_text_chunk(update)
        try:
            if plain is not None:
                chunk, text = plain
                encoded = _dump_str(text).encode()
                if chunk.message_id != message_id:
                    # The encoded id, made once per message id. May raise
                    # (an id that cannot be encoded): then kept as it was.
                    middle = _middles.get(chunk.message_id) or _middle(chunk.message_id)
                    message_id = chunk.message_id
                parts += (head, encoded, middle, _TAILS[type(chunk)])
                continue
            flat = _flat_update(update)
            if flat is not None:
                parts += (params_head, flat, b"}}\n")
                continue
        except UnicodeEncodeError:
            pass  # a lone surrogate: the general path escapes the message
        parts.append(_encode_other(session_id, update, extensions))
    return b"".join(parts)


def _encode_other(session_id: str, update: models.SessionUpdate, extensions: bool) -> bytes:
    """An update off the fast paths: an extension event (only for a client that
    asked for them), else the converter's encoding."""
    if type(update) is models.ExtensionEvent:
        if not extensions:
            return b""
        params = {"sessionId": session_id, **update.params}
        return encode_message(notification_message(update.method, params))
    return encode_update_general(session_id, update)


def _flat_update(update: models.SessionUpdate) -> bytes | None:
    """The ``update`` object of a plain usage or session info update, else None."""
    # The exact classes whose wire form is written here: a subclass (it may
    # add fields) takes the general path.
    if type(update) is models.UsageUpdate:
        used, size = update.used, update.size
        if update.cost is None and update.meta is None and type(used) is type(size) is int:
            return b'{"used":%d,"size":%d,"sessionUpdate":"usage_update"}' % (used, size)
    elif type(update) is models.SessionInfoUpdate and update.meta is None:
        title, updated_at = update.title, update.updated_at
        flat = b"{"
        if title is not None:
            flat += b'"title":' + _dump_str(title).encode() + b","
        if updated_at is not None:
            flat += b'"updatedAt":' + _dump_str(updated_at).encode() + b","
        return flat + b'"sessionUpdate":"session_info_update"}'
    return None


def encode_update_general(session_id: str, update: models.SessionUpdate) -> bytes:
    """The converter's encoding (the fast path's reference)."""
    notification = models.SessionNotification(session_id=session_id, update=update)
    return encode_message(notification_message(_METHOD, codec.unstructure(notification)))


# A session's updates share its id and a message's chunks their message id:
# their encoded parts are kept (bounded: cleared when full).
_CACHE_LIMIT = 1024
_session_heads: dict[str, tuple[bytes, bytes]] = {}
_NO_MESSAGE_ID = b',"type":"text"},"sessionUpdate":'
_middles: dict[str | None, bytes] = {None: _NO_MESSAGE_ID}


def warm_up() -> None:
    """Build the converter's encoders for the updates every turn sends (a
    tool call, a user message chunk), before a session needs them."""
    for update in (
        models.ToolCall(tool_call_id="warm-up", title="warm-up"),
        models.UserMessageChunk(content=models.TextContent(text="warm-up"), message_id="m"),
    ):
        encode_update_general("warm-up", update)


def _session_head(session_id: str) -> tuple[bytes, bytes]:
    """The notification up to its ``update`` object, and up to a text chunk's text."""
    if len(_session_heads) >= _CACHE_LIMIT:
        _session_heads.clear()
    params_head = (
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":'
        + _dump_str(session_id).encode()
        + b',"update":'
    )
    heads = _session_heads[session_id] = (params_head, params_head + b'{"content":{"text":')
    return heads


def _middle(message_id: str | None) -> bytes:
    """A text chunk's part between its text and its tail, cached."""
    assert message_id is not None  # always cached
    if len(_middles) >= _CACHE_LIMIT:
        _middles.clear()
        _middles[None] = _NO_MESSAGE_ID
    middle = _middles[message_id] = (
        b',"type":"text"},"messageId":' + _dump_str(message_id).encode() + b',"sessionUpdate":'
    )
    return middle


def send_updates_via(
    send_encoded: Callable[[bytes], Awaitable[None]],
    session_id: str,
    updates: Sequence[models.SessionUpdate],
    *,
    extensions: bool = False,
) -> Awaitable[None]:
    """Write a batch of ``session/update``s through the peer's single writer,
    in order, as one item: await what this returns. (A plain function: the
    hand-over is the peer's own coroutine, no wrapping one per batch.)
    ``extensions``: see `encode_updates`."""
    if not updates:
        return _nothing()
    encoded = encode_updates(session_id, updates, extensions=extensions)
    return send_encoded(encoded) if encoded else _nothing()


async def _nothing() -> None:
    pass

"""``session/update`` encoding: the fast paths (text chunks, usage and session
info updates) write the bytes the general (converter) path writes, for any
input; batches keep their order."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agybridge.acp import codec, models
from agybridge.agent import updates
from agybridge.agent.updates import encode_update, encode_update_general, encode_updates

# Every code point, lone surrogates and control characters included.
_ANY_TEXT = st.text(alphabet=st.characters(exclude_categories=()), max_size=30)
_META = st.none() | st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)
_CONTENT = st.builds(
    models.TextContent,
    text=_ANY_TEXT,
    annotations=st.none() | st.just({"priority": 1}),
    meta=_META,
) | st.builds(models.ImageContent, data=st.just("AA=="), mime_type=st.just("image/png"))
_KINDS = st.sampled_from(
    [models.AgentMessageChunk, models.AgentThoughtChunk, models.UserMessageChunk]
)


@given(
    session_id=_ANY_TEXT,
    kind=_KINDS,
    content=_CONTENT,
    message_id=st.none() | _ANY_TEXT,
    meta=_META,
)
def test_fast_path_writes_the_general_paths_bytes(
    session_id: str, kind: Any, content: Any, message_id: str | None, meta: Any
) -> None:
    update = kind(content=content, message_id=message_id, meta=meta)
    assert encode_update(session_id, update) == encode_update_general(session_id, update)


@given(
    session_id=_ANY_TEXT,
    update=st.builds(
        models.UsageUpdate,
        used=st.integers(0, 2**40),
        size=st.integers(0, 2**40),
        cost=st.none() | st.builds(models.Cost, amount=st.floats(0, 5), currency=st.just("USD")),
        meta=_META,
    )
    | st.builds(
        models.SessionInfoUpdate,
        title=st.none() | _ANY_TEXT,
        updated_at=st.none() | _ANY_TEXT,
        meta=_META,
    ),
)
def test_usage_and_info_fast_paths_write_the_general_paths_bytes(
    session_id: str, update: models.SessionUpdate
) -> None:
    assert encode_update(session_id, update) == encode_update_general(session_id, update)


@pytest.mark.parametrize(
    "update",
    [models.UsageUpdate(used=1, size=2), models.SessionInfoUpdate(updated_at="now")],
)
def test_a_session_id_with_a_lone_surrogate_is_escaped_not_raised(
    update: models.SessionUpdate,
) -> None:
    """The usage and info fast paths leave a session id without UTF-8 form to
    the general path (ASCII escapes), as the text chunk path does."""
    assert encode_update("s\ud800", update) == encode_update_general("s\ud800", update)


@given(texts=st.lists(_ANY_TEXT, max_size=5))
def test_a_batch_is_its_lines_in_order(texts: list[str]) -> None:
    batch = [models.AgentMessageChunk(content=models.TextContent(text=t)) for t in texts]
    batch.append(models.UsageUpdate(used=1, size=2))
    data = encode_updates("s", batch)
    assert data.endswith(b"\n") and data.count(b"\n") == len(batch)
    assert data == b"".join(encode_update_general("s", u) for u in batch)


def test_the_fast_paths_never_reach_the_converter(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the fast path."""

    def no_converter(_: Any) -> Any:
        raise AssertionError("the converter was used")

    monkeypatch.setattr(codec, "unstructure", no_converter)
    chunk = models.AgentMessageChunk(content=models.TextContent(text="hé"), message_id="m")
    assert encode_update("s", chunk).startswith(b'{"jsonrpc":"2.0","method":"session/update"')
    encode_update("s", models.UsageUpdate(used=1, size=2))
    encode_update("s", models.SessionInfoUpdate(title="t", updated_at="2026-12-01T00:00:00Z"))
    with pytest.raises(AssertionError):
        encode_update("s", models.UsageUpdate(used=1, size=2, meta={"x": 1}))


async def test_send_updates_via_hands_one_item_or_none() -> None:
    sent: list[bytes] = []

    async def send_encoded(data: bytes) -> None:
        sent.append(data)

    chunk = models.AgentMessageChunk(content=models.TextContent(text="x"))
    await updates.send_updates_via(send_encoded, "s", [])
    await updates.send_updates_via(send_encoded, "s", [chunk, chunk])
    assert sent == [encode_update("s", chunk) * 2]


# Few message ids (one without UTF-8 form), so runs of one message's plain
# chunks are common, as in a turn.
_PLAIN_CHUNK = st.builds(
    models.AgentMessageChunk,
    content=st.builds(models.TextContent, text=_ANY_TEXT),
    message_id=st.sampled_from([None, "m", "m\ud800"]),
)
_ANY_UPDATE = (
    _PLAIN_CHUNK
    | st.builds(models.AgentMessageChunk, content=_CONTENT, message_id=_ANY_TEXT, meta=_META)
    | st.builds(models.AgentThoughtChunk, content=_CONTENT, message_id=st.none() | _ANY_TEXT)
    | st.builds(models.UsageUpdate, used=st.integers(0, 9), size=st.integers(0, 9), meta=_META)
    | st.builds(models.SessionInfoUpdate, updated_at=st.none() | _ANY_TEXT, meta=_META)
    | st.builds(models.Plan, entries=st.just([]))
)


@given(session_id=st.sampled_from(["s", "s\ud800"]) | _ANY_TEXT, batch=st.lists(_ANY_UPDATE))
def test_a_mixed_batch_is_the_general_paths_lines_in_order(
    session_id: str, batch: list[models.SessionUpdate]
) -> None:
    """The batch encoder, which looks parts up once per session and per run of
    a message's chunks, writes what the general path writes for each update."""
    expected = b"".join(encode_update_general(session_id, u) for u in batch)
    assert encode_updates(session_id, batch) == expected


_EVENT = st.builds(
    models.ExtensionEvent,
    method=st.just("_agybridge/warning"),
    params=st.fixed_dictionaries({"code": st.just("x"), "message": _ANY_TEXT}),
)


@given(session_id=st.sampled_from(["s", "s\ud800"]), batch=st.lists(_ANY_UPDATE | _EVENT))
def test_extension_events_are_written_only_to_a_client_that_asked(
    session_id: str, batch: list[models.SessionUpdate]
) -> None:
    """A client that did not ask for the ``_agybridge/*`` notifications gets the
    batch's other lines, byte for byte; one that asked gets each event as its
    own notification, with the session's id, where it was in the batch."""
    others = [u for u in batch if not isinstance(u, models.ExtensionEvent)]
    assert encode_updates(session_id, batch) == encode_updates(session_id, others)
    lines = encode_updates(session_id, batch, extensions=True).splitlines()
    assert len(lines) == len(batch)
    for line, update in zip(lines, batch, strict=True):
        message = json.loads(line)
        if isinstance(update, models.ExtensionEvent):
            assert message == {
                "jsonrpc": "2.0",
                "method": update.method,
                "params": {"sessionId": session_id, **update.params},
            }
        else:
            assert message["method"] == "session/update"


async def test_a_batch_of_unwanted_events_hands_nothing_over() -> None:
    sent: list[bytes] = []

    async def send_encoded(data: bytes) -> None:
        sent.append(data)

    event = models.ExtensionEvent("_agybridge/warning", {"code": "x", "message": "y"})
    await updates.send_updates_via(send_encoded, "s", [event])
    assert sent == []

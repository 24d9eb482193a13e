"""The running turn's log: text chunks in a row kept as one, everything else
as sent, the oldest entries dropped beyond the bound and counted."""

from __future__ import annotations

import itertools
from typing import Any
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from agybridge.acp import codec, models, turn_log
from agybridge.acp.turn_log import TurnLog

_KINDS = (models.AgentMessageChunk, models.AgentThoughtChunk, models.UserMessageChunk)

text_chunks = st.builds(
    lambda kind, text, message_id: kind(
        content=models.TextContent(text=text), message_id=message_id
    ),
    st.sampled_from(_KINDS),
    st.text(max_size=5),
    st.sampled_from([None, "m1", "m2"]),
)
others = st.one_of(
    st.builds(
        lambda text: models.AgentMessageChunk(
            content=models.TextContent(text=text, annotations={"priority": 1.0})
        ),
        st.text(max_size=3),
    ),
    st.builds(lambda n: models.UsageUpdate(used=n, size=100), st.integers(0, 100)),
    st.builds(
        lambda text: models.AgentMessageChunk(
            content=models.TextContent(text=text), meta={"k": text}
        ),
        st.text(max_size=3),
    ),
)
updates = st.lists(st.one_of(text_chunks, text_chunks, others), max_size=60)


def _mergeable(update: models.SessionUpdate) -> tuple[type[Any], str | None] | None:
    if not isinstance(update, _KINDS) or update.meta is not None:
        return None
    content = update.content
    if not isinstance(content, models.TextContent) or content.annotations or content.meta:
        return None
    return (type(update), update.message_id)


def model(sent: list[models.SessionUpdate]) -> list[tuple[dict[str, Any], int]]:
    """Adjacent plain text chunks of one kind and message merged: (wire, count)."""
    out: list[tuple[Any, int, Any]] = []
    for update in sent:
        key = _mergeable(update)
        if key is not None and out and out[-1][2] == key:
            wire, count, _ = out[-1]
            wire = {**wire, "content": {**wire["content"], "text": wire["content"]["text"]}}
            wire["content"]["text"] += update.content.text  # type: ignore[union-attr]
            out[-1] = (wire, count + 1, key)
        else:
            out.append((codec.unstructure(update), 1, key))
    return [(wire, count) for wire, count, _ in out]


@given(sent=updates, bound=st.integers(1, 8), block=st.integers(1, 4))
def test_the_log_is_the_merged_tail_of_what_was_sent(
    sent: list[models.SessionUpdate], bound: int, block: int
) -> None:
    original = turn_log.BLOCK_PARTS
    turn_log.BLOCK_PARTS = block  # runs are joined in blocks: any block size
    try:
        log = TurnLog(max_entries=bound)
        for update in sent:
            log.add(update)
    finally:
        turn_log.BLOCK_PARTS = original
    merged = model(sent)
    kept = merged[-bound:] if merged else []
    assert [codec.unstructure(u) for u in log.updates()] == [wire for wire, _ in kept]
    assert log.lost == sum(count for _, count in merged[: len(merged) - len(kept)])
    assert len(log) == len(kept)
    log.clear()
    assert log.updates() == [] and log.lost == 0


def test_a_hundred_thousand_deltas_are_one_entry() -> None:
    log = TurnLog()
    for n in range(100_000):
        log.add(models.AgentMessageChunk(content=models.TextContent(text=f"w{n} "), message_id="m"))
    assert len(log) == 1
    (update,) = log.updates()
    assert isinstance(update, models.AgentMessageChunk) and update.message_id == "m"
    assert isinstance(update.content, models.TextContent)
    assert update.content.text == "".join(f"w{n} " for n in range(100_000))


@given(sent=updates, bound=st.integers(1, 8), cuts=st.lists(st.integers(0, 60), max_size=6))
def test_a_batch_is_logged_as_its_updates_one_by_one(
    sent: list[models.SessionUpdate], bound: int, cuts: list[int]
) -> None:
    """The outlet hands the log a batch at a time (``extend``)."""
    one_by_one, batched = TurnLog(max_entries=bound), TurnLog(max_entries=bound)
    for update in sent:
        one_by_one.add(update)
    edges = sorted({0, len(sent), *(cut for cut in cuts if cut <= len(sent))})
    for start, stop in itertools.pairwise(edges):
        batched.extend(sent[start:stop])
    assert [codec.unstructure(u) for u in batched.updates()] == [
        codec.unstructure(u) for u in one_by_one.updates()
    ]
    assert (batched.lost, len(batched)) == (one_by_one.lost, len(one_by_one))


@given(sent=updates, bound=st.integers(1, 8), merge_after=st.integers(1, 8))
def test_updates_merged_as_they_come_or_when_read_are_logged_alike(
    sent: list[models.SessionUpdate], bound: int, merge_after: int
) -> None:
    """Fresh updates are merged once ``MERGE_AFTER`` have come (any count) or
    when the log is read: the log is the same."""
    when_read = TurnLog(max_entries=bound)
    when_read.extend(sent)
    assert len(sent) < turn_log.MERGE_AFTER  # so `when_read` merges only when read
    with mock.patch.object(turn_log, "MERGE_AFTER", merge_after):
        as_they_come = TurnLog(max_entries=bound)
        for update in sent:
            as_they_come.add(update)
    assert [codec.unstructure(u) for u in as_they_come.updates()] == [
        codec.unstructure(u) for u in when_read.updates()
    ]
    assert (as_they_come.lost, len(as_they_come)) == (when_read.lost, len(when_read))

"""A session's book: the journal lines of a turn and its index row."""

from __future__ import annotations

import attrs

from agybridge.session.config import LaunchSettings
from agybridge.session.persistence import SessionBook
from agybridge.store import AsyncStore, JournalEntry, SessionRecord, Store, canonical_timestamp
from agybridge.translate.history import turn_entries
from agybridge.translate.mapper import TurnMapper

from ..translate.test_mapper import run_turn, step


async def test_a_turns_lines_and_row_carry_one_moment() -> None:
    """One turn is one write: its lines' created_at is the row's updated_at."""
    store = AsyncStore(Store.open_memory())
    book = SessionBook(store, "s", 0)
    mapper = TurnMapper(message_id="m")
    run_turn(mapper, [step(1, "WAITING", "agent_response", text_delta="hi")])

    def row(updated_at: str) -> SessionRecord:
        return SessionBook.row(
            session_id="s",
            cwd="/w",
            additional_dirs=(),
            conversation_id=None,
            drift=[],
            title=None,
            settings=LaunchSettings(),
            created_at="2026-05-01T10:00:00.000000Z",
            updated_at=updated_at,
        )

    await book.record_turn("hello", mapper, row)
    lines = await store.journal("s")
    stored = await store.get_session("s")
    await store.aclose()
    assert [(line.kind, line.text) for line in lines] == [("user", "hello"), ("agent", "hi")]
    assert stored is not None and canonical_timestamp(stored.updated_at) == stored.updated_at
    assert {line.created_at for line in lines} == {stored.updated_at}
    assert book.next_turn == 1


def test_turn_lines_are_what_the_named_constructors_make() -> None:
    """turn_entries builds its lines with the class itself: the same lines as
    JournalEntry.user/tool/agent, at the one moment given."""
    mapper = TurnMapper(message_id="m")
    run_turn(
        mapper,
        [
            step(2, "DONE", "agent_response", text_delta="LAUNCHED\n"),
            step(5, "DONE", "tool", tool_name="run_command"),
            step(7, "DONE", "agent_response", text_delta="RESULT=1\n"),
        ],
    )
    [call] = mapper.tools.calls.values()
    at = "2026-05-01T10:00:00.000000Z"
    lines = turn_entries("s", 3, "run it", mapper, "u1", created_at=at)
    expected = [
        JournalEntry.user("s", 3, 0, "run it", message_id="u1"),
        JournalEntry.tool(
            "s",
            3,
            1,
            tool_call_id=call.call_id,
            kind=call.kind,
            title=call.title,
            status=call.status if call.finished else "failed",
        ),
        JournalEntry.agent("s", 3, 2, mapper.streamed_text, message_id="m"),
    ]
    assert lines == [attrs.evolve(line, created_at=at) for line in expected]

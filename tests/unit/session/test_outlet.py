"""The outlet without processes: what a client that attaches mid-turn, after
a turn, or instead of another client is sent, and in which order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing

from agybridge.acp import codec, models
from agybridge.acp.turn_log import MAX_ENTRIES
from agybridge.session.outlet import HOLD_LIMIT, Outlet, turn_outcome


class Client:
    def __init__(self) -> None:
        self.got: list[dict[str, Any]] = []

    async def __call__(self, session_id: str, updates: Sequence[models.SessionUpdate]) -> None:
        assert session_id == "s"
        self.got += [codec.unstructure(update) for update in updates]

    def texts(self) -> list[str]:
        return [u["content"]["text"] for u in self.got if "content" in u]

    def turns(self) -> list[dict[str, Any]]:
        return [u["_meta"]["agybridge"]["turn"] for u in self.got if _turn_of(u)]


def _turn_of(update: dict[str, Any]) -> bool:
    return "turn" in (update.get("_meta") or {}).get("agybridge", {})


def chunk(text: str, message_id: str | None = None) -> models.SessionUpdate:
    return models.AgentMessageChunk(content=models.TextContent(text=text), message_id=message_id)


async def history() -> list[models.SessionUpdate]:
    return [chunk("old turn")]


ENDED = turn_outcome("ended", stopReason="end_turn")


async def test_mid_turn_attach_gets_history_turn_so_far_then_live_then_outcome() -> None:
    """History, the prompt, the turn so far, ``running``; later updates live;
    the outcome at the end (the client did not send the prompt)."""
    owner, late = Client(), Client()
    outlet = Outlet("s", owner)
    await outlet.turn_started("the prompt")
    await outlet.send(chunk("a"))
    outlet.detach()
    await outlet.send(chunk("b"))
    await outlet.attach_replaying(late, history)
    await outlet.send(chunk("c"))
    async with outlet.journalling():
        pass
    await outlet.turn_ended(ENDED)
    # The turn so far is replayed with its text chunks in a row as one.
    assert late.texts() == ["old turn", "the prompt", "ab", "c"]
    assert late.turns() == [{"state": "running"}, {"state": "ended", "stopReason": "end_turn"}]
    assert owner.texts() == ["a"] and owner.turns() == []


async def test_the_prompts_own_client_is_not_told_the_outcome() -> None:
    """The prompt's answer is its outcome: no extra notification."""
    owner = Client()
    outlet = Outlet("s", owner)
    await outlet.turn_started("p")
    await outlet.send(chunk("a"))
    await outlet.turn_ended(ENDED)
    assert owner.turns() == [] and owner.texts() == ["a"]


async def test_outcome_of_a_turn_ended_while_detached_is_told_once() -> None:
    """A turn that ended with nobody attached: the next client is told, once."""
    outlet = Outlet("s", Client())
    await outlet.turn_started("p")
    outlet.detach()
    async with outlet.journalling():
        pass
    await outlet.turn_ended(ENDED)
    first, second = Client(), Client()
    await outlet.attach_replaying(first, history)
    await outlet.attach_replaying(second, history)
    assert first.turns() == [{"state": "ended", "stopReason": "end_turn"}]
    assert first.texts() == ["old turn"]  # the journal has the turn now
    assert second.turns() == []


async def test_attach_while_journalling_sees_the_turn_once() -> None:
    """An attach that starts while the turn is being journalled waits for it:
    the turn is then in the history and not replayed again."""
    outlet = Outlet("s", None)
    await outlet.turn_started("p")
    await outlet.send(chunk("a"))
    journal: list[models.SessionUpdate] = [chunk("old turn")]
    late = Client()

    async def read_journal() -> list[models.SessionUpdate]:
        return list(journal)

    async with trio.open_nursery() as nursery, outlet.journalling():
        nursery.start_soon(outlet.attach_replaying, late, read_journal)
        await trio.testing.wait_all_tasks_blocked()
        journal.extend([models.UserMessageChunk(content=models.TextContent(text="p")), chunk("a")])
    await outlet.turn_ended(ENDED)
    assert late.texts() == ["old turn", "p", "a"]
    # Journalled but not yet answered: still running, then the outcome.
    assert late.turns() == [{"state": "running"}, {"state": "ended", "stopReason": "end_turn"}]


async def test_a_failed_journal_write_keeps_the_turn_for_a_late_client() -> None:
    """The journalling block raised: the turn is not in the journal, so the
    outlet keeps it (a late client is shown it) and attaching is not held off."""
    outlet = Outlet("s", None)
    await outlet.turn_started("p")
    await outlet.send(chunk("a"))
    with pytest.raises(RuntimeError, match="disk"):
        async with outlet.journalling():
            raise RuntimeError("disk")
    late = Client()
    with trio.fail_after(5):
        await outlet.attach_replaying(late, history)
    assert late.texts() == ["old turn", "p", "a"]


async def test_replaced_client_is_told_and_gets_nothing_more() -> None:
    """Two clients: the newer one gets the session; the older is told once."""
    old, new = Client(), Client()
    outlet = Outlet("s", old)
    replaced = await outlet.attach_replaying(new, None)
    await outlet.send(chunk("x"))
    assert replaced is old
    assert old.got == [
        {
            "_meta": {
                "agybridge": {
                    "attached": False,
                    "reason": "the session was opened by another client",
                }
            },
        }
    ]
    assert new.texts() == ["x"]


async def test_a_client_gone_before_its_turn_to_attach_takes_nothing() -> None:
    """A client that left for good while its load waited (``gone``) does not
    take the session: the attached client keeps it, is told nothing, and gets
    what follows; a client still there (``gone`` false) takes it as before."""
    live, departed = Client(), Client()
    outlet = Outlet("s", live)
    replaced = await outlet.attach_replaying(departed, history, gone=lambda: True)
    await outlet.send(chunk("x"))
    assert replaced is None and outlet.client is live
    assert live.got == [codec.unstructure(chunk("x"))] and departed.got == []
    newer = Client()
    assert await outlet.attach_replaying(newer, None, gone=lambda: False) is live
    assert outlet.client is newer


class Stuck(Client):
    """A client that stopped reading: every hand-over waits forever."""

    async def __call__(self, session_id: str, updates: Sequence[models.SessionUpdate]) -> None:
        await trio.sleep_forever()


@pytest.mark.parametrize("waiting", [0, 1])
async def test_a_client_that_stopped_reading_does_not_block_the_next_one(
    waiting: int, autojump_clock: trio.testing.MockClock
) -> None:
    """A session blocked handing updates to a client that stopped reading (and
    ``waiting`` more updates queued behind) is taken over by a client that opens
    it: the new one gets the turn so far, the rest live, then the outcome."""
    stuck, new = Stuck(), Client()
    outlet = Outlet("s", stuck)
    await outlet.turn_started("p")
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            for text in "ab"[: 1 + waiting]:
                nursery.start_soon(outlet.send, chunk(text))
                await trio.testing.wait_all_tasks_blocked()
            await outlet.attach_replaying(new, None)
        await outlet.send(chunk("c"))
        await outlet.turn_ended(ENDED)
    # The turn log joins a run of text.
    assert new.texts() == ["p", "ab" if waiting else "a", "c"]
    assert new.turns() == [{"state": "running"}, {"state": "ended", "stopReason": "end_turn"}]


async def test_a_long_detached_turn_is_kept_bounded() -> None:
    """Beyond MAX_ENTRIES the oldest updates go, and the client is told how many."""
    outlet = Outlet("s", None)
    await outlet.turn_started("p")
    for n in range(MAX_ENTRIES + 5):
        await outlet.send(chunk(str(n), message_id=str(n)))  # not one text run
    late = Client()
    await outlet.attach_replaying(late, None)
    texts = late.texts()
    assert "6 earlier updates" in texts[0]  # the prompt and the first five
    assert texts[1] == "5" and texts[-1] == str(MAX_ENTRIES + 4)
    assert len(texts) == MAX_ENTRIES + 1


class Batches(Client):
    """Records each hand-over as one batch."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []

    async def __call__(self, session_id: str, updates: Sequence[models.SessionUpdate]) -> None:
        self.sizes.append(len(updates))
        await super().__call__(session_id, updates)


async def test_held_updates_go_as_one_batch_in_order() -> None:
    """A mapped read is one hand-over; past HOLD_LIMIT it is handed over in
    bounded parts; ``unheld`` hands over what is held before its block."""
    client = Batches()
    outlet = Outlet("s", client)
    async with outlet.holding():
        await outlet.send(chunk("a"))
        await outlet.send_all([chunk("b"), chunk("c")])
        assert client.sizes == []
        async with outlet.unheld():
            assert client.sizes == [3]
            await outlet.send(chunk("d"))  # straight through
        await outlet.send_all([chunk(str(n)) for n in range(HOLD_LIMIT)])
    assert client.sizes == [3, 1, HOLD_LIMIT]
    assert client.texts() == ["a", "b", "c", "d", *[str(n) for n in range(HOLD_LIMIT)]]
    await outlet.send_all([chunk("e"), chunk("f")])  # not holding: one batch
    assert client.sizes[-1] == 2


class Gated(Client):
    """A client whose first hand-over waits until ``go`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting = trio.Event()
        self.go = trio.Event()

    async def __call__(self, session_id: str, updates: Sequence[models.SessionUpdate]) -> None:
        if not self.waiting.is_set():
            self.waiting.set()
            await self.go.wait()
        await super().__call__(session_id, updates)


async def _send_during_hand_over(outlet: Outlet, client: Gated, text: str) -> None:
    # Another task (e.g. session/load's announcements) sends while the
    # loop's held batch is being handed over.
    await client.waiting.wait()
    await outlet.send(chunk(text))
    client.go.set()


@pytest.mark.parametrize("end", ["holding ends", "unheld"])
async def test_an_update_sent_while_a_held_batch_is_handed_over_is_not_lost(end: str) -> None:
    """Another task's update, sent while the end of a holding block (or an
    ``unheld`` block) hands the batch to a slow client, is handed over after it."""
    client = Gated()
    outlet = Outlet("s", client)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_send_during_hand_over, outlet, client, "other")
        async with outlet.holding():
            await outlet.send(chunk("a"))
            if end == "unheld":
                async with outlet.unheld():
                    await outlet.send(chunk("b"))
    if end == "holding ends":
        await outlet.send(chunk("b"))
    assert client.texts() == ["a", "other", "b"]


@pytest.mark.parametrize("end", ["unheld", "holding ends"])
async def test_held_updates_another_task_is_handing_over_go_first(end: str) -> None:
    """Held updates that another task's send hands over (at HOLD_LIMIT) are
    with the client before an ``unheld`` block (where a prompt is answered)
    begins, and before the holding block is over."""
    client = Gated()
    outlet = Outlet("s", client)
    seen: list[int] = []
    async with trio.open_nursery() as nursery:
        async with outlet.holding():
            await outlet.send_all([chunk(str(n)) for n in range(HOLD_LIMIT - 1)])
            # The loop awaits something mid-batch; another task's update fills
            # the batch and hands it over, to a client slow to take it.
            nursery.start_soon(outlet.send, chunk("other"))
            await client.waiting.wait()
            nursery.start_soon(_release, client)
            if end == "unheld":
                async with outlet.unheld():
                    seen.append(len(client.got))
        seen.append(len(client.got))
    assert seen[0] == HOLD_LIMIT


async def _release(client: Gated) -> None:
    await trio.testing.wait_all_tasks_blocked()
    client.go.set()


LEAD = models.SessionInfoUpdate(updated_at="2026-12-02T00:00:00Z")


async def test_a_turns_lead_rides_ahead_of_its_first_hand_over() -> None:
    """The lead costs no hand-over of its own: it goes first in the turn's
    first one, once; `hand_over_lead` then has nothing to send."""
    client = Batches()
    outlet = Outlet("s", client)
    await outlet.turn_started("the prompt", lead=LEAD)
    assert client.sizes == []
    await outlet.send_all([chunk("a"), chunk("b")])
    await outlet.send(chunk("c"))
    await outlet.hand_over_lead()
    assert client.sizes == [3, 1]
    assert client.got[0] == {"updatedAt": LEAD.updated_at}
    assert client.texts() == ["a", "b", "c"]


async def test_a_lead_nothing_followed_is_handed_over_alone() -> None:
    """agy wrote nothing: the answer's `hand_over_lead` sends it, once."""
    client = Batches()
    outlet = Outlet("s", client)
    await outlet.turn_started("the prompt", lead=LEAD)
    await outlet.hand_over_lead()
    await outlet.hand_over_lead()
    assert client.sizes == [1]


async def test_a_client_attaching_before_the_lead_went_gets_it_once_in_the_replay() -> None:
    """The replay has the lead (the turn's log does); the client it replaced
    gets it before its detached notice; neither gets it again."""
    first, late = Batches(), Batches()
    outlet = Outlet("s", first)
    await outlet.turn_started("the prompt", lead=LEAD)
    await outlet.attach_replaying(late, None)
    await outlet.send(chunk("a"))
    assert late.got[1] == {"updatedAt": LEAD.updated_at}  # after the prompt, before "running"
    assert late.turns() == [{"state": "running"}]
    assert late.texts() == ["the prompt", "a"]
    assert first.sizes == [2]  # the lead, then the detached notice
    assert first.got[0] == {"updatedAt": LEAD.updated_at}

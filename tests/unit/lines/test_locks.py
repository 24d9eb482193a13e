"""EagerLock: one holder at a time, arrival order, no scheduler pass when free."""

from __future__ import annotations

import trio
import trio.testing

from agybridge.locks import EagerLock


class Steps(trio.abc.Instrument):
    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task, self.count = task, 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.count += task is self.task


async def test_a_free_lock_is_taken_without_yielding() -> None:
    lock = EagerLock()
    steps = Steps(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(steps)
    try:
        async with lock:
            pass
        async with lock:
            pass
    finally:
        trio.lowlevel.remove_instrument(steps)
    assert steps.count == 0


async def test_waiters_take_it_in_arrival_order_and_a_cancelled_waiter_drops_out() -> None:
    lock = EagerLock()
    order: list[str] = []
    inside: list[str] = []

    async def hold(name: str) -> None:
        async with lock:
            inside.append(name)
            assert inside == [name], "two holders at once"
            await trio.lowlevel.checkpoint()  # others may run here, not enter
            order.append(name)
            inside.remove(name)

    gone = trio.CancelScope()

    async def cancelled_waiter() -> None:
        with gone:
            await hold("gone")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            async with lock:
                for name in ("a", "b"):
                    nursery.start_soon(hold, name)
                    await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(cancelled_waiter)
                await trio.testing.wait_all_tasks_blocked()
                nursery.start_soon(hold, "c")
                await trio.testing.wait_all_tasks_blocked()
                gone.cancel()
                await trio.testing.wait_all_tasks_blocked()
                order.append("first")
            # Released while three wait: a newcomer queues behind them.
            nursery.start_soon(hold, "late")
    assert order == ["first", "a", "b", "c", "late"]
    assert gone.cancelled_caught


async def test_it_serves_as_a_to_thread_limiter() -> None:
    lock = EagerLock()
    limiter = lock  # trio takes any object with the limiter's two methods
    results = [await trio.to_thread.run_sync(lambda n=n: n * 2, limiter=limiter) for n in range(3)]  # type: ignore[arg-type]
    assert results == [0, 2, 4]
    async with lock:  # released after every call
        pass


async def test_a_release_right_after_the_only_waiter_was_cancelled_frees_it() -> None:
    """The waiter's cancel is delivered, the holder releases before the waiter
    runs again: the lock is free (nobody to hand it to), not held by nobody."""
    lock = EagerLock()
    waiter = trio.CancelScope()

    async def wait() -> None:
        with waiter:
            async with lock:
                raise AssertionError("a cancelled waiter never holds it")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await lock.__aenter__()
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            waiter.cancel()  # the waiter leaves the lot now, runs later
            await lock.__aexit__(None, None, None)
            steps = Steps(trio.lowlevel.current_task())
            trio.lowlevel.add_instrument(steps)
            try:
                async with lock:  # free: taken at once
                    pass
            finally:
                trio.lowlevel.remove_instrument(steps)
            assert steps.count == 0
    assert waiter.cancelled_caught


async def test_many_holders_and_cancellations_keep_it_exclusive_and_fifo() -> None:
    lock = EagerLock()
    inside: list[int] = []
    order: list[int] = []
    scopes = [trio.CancelScope() for _ in range(40)]

    async def hold(n: int) -> None:
        with scopes[n]:
            async with lock:
                inside.append(n)
                assert inside == [n], "two holders at once"
                order.append(n)
                await trio.lowlevel.checkpoint()
                inside.remove(n)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            async with lock:
                for n in range(40):
                    nursery.start_soon(hold, n)
                    await trio.testing.wait_all_tasks_blocked()
                for n in range(0, 40, 3):
                    scopes[n].cancel()
            await trio.testing.wait_all_tasks_blocked()
    assert order == [n for n in range(40) if n % 3]
    async with lock:  # free again
        pass


async def test_locked_says_whether_someone_holds_it() -> None:
    lock = EagerLock()
    assert not lock.locked()
    async with lock:
        assert lock.locked()
    assert not lock.locked()

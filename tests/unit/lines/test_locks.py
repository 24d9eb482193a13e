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


async def test_a_release_just_after_the_only_waiter_was_cancelled_frees_the_lock() -> None:
    """Cancelling a waiter takes it out of the queue at once, but it runs (and
    stops counting as waiting) only later: a release in between frees the lock."""
    lock = EagerLock()
    scope = trio.CancelScope()

    async def waiter() -> None:
        with scope:
            async with lock:
                raise AssertionError("a cancelled waiter got the lock")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery, lock:
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()  # the waiter has not run since
        async with lock:
            pass
    assert scope.cancelled_caught

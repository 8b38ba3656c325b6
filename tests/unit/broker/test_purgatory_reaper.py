"""The purgatory's asyncio shell: a delayed operation expires on the broker's clock when the
loop timer fires, and the timer is re-armed for a later deadline."""

from __future__ import annotations

import asyncio

from broker.purgatory_reaper import PurgatoryReaper
from replication.purgatory import DelayedOperation, DelayedOperationPurgatory
from storage.clock import SystemClock


class Answered(DelayedOperation):
    def __init__(self, delay_ms: int, answer: asyncio.Future[str]) -> None:
        super().__init__(delay_ms)
        self.answer = answer
        self.expired = False

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        self.answer.set_result("answered")  # on_expiration comes after, as in Kafka

    def on_expiration(self) -> None:
        self.expired = True


def test_operations_expire_in_deadline_order() -> None:
    async def scenario() -> list[str]:
        clock = SystemClock()
        reaper = PurgatoryReaper(DelayedOperationPurgatory[Answered]("Fetch", clock=clock))
        loop = asyncio.get_running_loop()
        finished: list[str] = []
        late, early = loop.create_future(), loop.create_future()
        late.add_done_callback(lambda _: finished.append("late"))
        early.add_done_callback(lambda _: finished.append("early"))
        started = clock.monotonic_ms()
        operations = [Answered(60, late), Answered(20, early)]
        assert not reaper.watch(operations[0], ["t-0"])
        assert not reaper.watch(operations[1], ["t-1"])  # re-arms for the earlier deadline
        await asyncio.gather(late, early)
        assert clock.monotonic_ms() - started >= 60
        assert reaper.purgatory.delayed() == 0
        assert late.result() == early.result() == "answered"
        assert all(operation.expired for operation in operations)
        return finished

    assert asyncio.run(scenario()) == ["early", "late"]

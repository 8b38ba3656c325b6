"""``PeriodicOperation`` (Kafka's ImbalanceSchedule) against a brute-force model: a list of what
happened, from which when the operation may run is recomputed from scratch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.controller.periodic import PeriodicOperation

INTERVAL_MS = 100

# (kind, argument): "image" moves the image (argument: whether the operation is needed there),
# "tick" checks and maybe runs it (argument: ms passed), "commit" finishes a run (more to do?),
# "resign" cancels everything.
events = st.lists(st.one_of(
    st.tuples(st.just("image"), st.booleans()),
    st.tuples(st.just("tick"), st.integers(0, 150)),
    st.tuples(st.just("commit"), st.booleans()),
    st.tuples(st.just("resign"), st.none()),
), max_size=60)


class Model:
    """When the operation may run, stated directly: a check happens at a tick when nothing is
    scheduled or running and the image moved (or a run finished) since the last check; a needed
    check schedules it one interval later, or at once after a run that had more to do."""

    def __init__(self) -> None:
        self.offset = 0
        self.needed = False
        self.last_checked: int | None = None
        self.scheduled_at: int | None = None
        self.running = False
        self.more = False

    def tick(self, now_ms: int) -> bool:
        if self.scheduled_at is None and not self.running and self.offset != self.last_checked:
            self.last_checked = self.offset
            if self.needed:
                self.scheduled_at = now_ms + (0 if self.more else INTERVAL_MS)
        if self.scheduled_at is not None and now_ms >= self.scheduled_at:
            self.scheduled_at, self.running = None, True
            return True
        return False


@settings(max_examples=200, deadline=None)
@given(events)
def test_runs_exactly_when_the_model_says(history: list[tuple[str, object]]) -> None:
    schedule, model, now_ms = PeriodicOperation(INTERVAL_MS), Model(), 0
    for kind, argument in history:
        if kind == "image":
            model.offset += 1
            model.needed = bool(argument)
        elif kind == "tick":
            now_ms += int(argument)  # type: ignore[call-overload]
            if schedule.needs_check(model.offset):
                schedule.check(model.offset, now_ms, needed=model.needed)
            assert schedule.take_due(now_ms) == model.tick(now_ms)
        elif kind == "commit" and model.running:
            schedule.finished(more=bool(argument))
            model.running, model.more, model.last_checked = False, bool(argument), None
        elif kind == "resign":
            schedule.cancel()
            model.scheduled_at, model.running, model.more, model.last_checked = None, False, False, None
        assert schedule.running == model.running
        assert schedule.due_ms == model.scheduled_at
        assert not (schedule.running and schedule.due_ms is not None)


def test_a_disabled_operation_never_runs() -> None:
    schedule = PeriodicOperation(None)
    assert not schedule.needs_check(5)
    schedule.check(5, 0, needed=True)
    assert not schedule.take_due(10**9)

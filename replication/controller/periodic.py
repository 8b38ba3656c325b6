"""``PeriodicOperation``: when the active controller runs one of its periodic elections — the
auto leader rebalance (``leader.imbalance.check.interval.seconds``) and the unclean elections of
leaderless partitions (``unclean.leader.election.interval.ms``); Kafka's ``ImbalanceSchedule``
in ``QuorumController``.

States (Kafka's DEFERRED / SCHEDULED / IMMEDIATELY): idle until the image shows the operation is
*needed* (``check``), then *scheduled* one interval later — or at once when the previous run
said there was more to do (it stopped at its bound of elections); ``take_due`` hands it out once
its time has come and it stays *running* until ``finished``. While scheduled or running nothing
re-checks; after a run (committed, ``finished``), or when the image has moved on since the last
check, the next check may schedule it again. Kafka checks after every write event; here the
controller's tick checks whenever the image's last offset moved, which is the same set of
moments seen at the tick's granularity.

A sans-IO value stepped by the controller with the time passed in; owned by the broker's event
loop (through ``QuorumController``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PeriodicOperation"]


@dataclass(slots=True)
class PeriodicOperation:
    """``interval_ms`` None: disabled (e.g. ``auto.leader.rebalance.enable=false``)."""

    interval_ms: int | None
    due_ms: int | None = None  # scheduled to run at
    running: bool = False  # handed out, its records not yet committed
    immediately: bool = False  # the last run stopped at its bound: the next one runs at once
    checked_offset: int | None = None  # the image's last offset at the last check

    @property
    def idle(self) -> bool:
        return self.due_ms is None and not self.running

    def needs_check(self, last_offset: int) -> bool:
        """Whether a check is due: enabled, idle, and the image moved since the last one."""
        return self.interval_ms is not None and self.idle and last_offset != self.checked_offset

    def check(self, last_offset: int, now_ms: int, *, needed: bool) -> None:
        """Record a check of the image at ``last_offset``; schedule if ``needed``."""
        if not self.needs_check(last_offset):
            return
        assert self.interval_ms is not None
        self.checked_offset = last_offset
        if needed:
            self.due_ms = now_ms if self.immediately else now_ms + self.interval_ms

    def take_due(self, now_ms: int) -> bool:
        """True once the scheduled time has come: the caller runs it now."""
        if self.due_ms is None or now_ms < self.due_ms:
            return False
        self.due_ms, self.running = None, True
        return True

    def finished(self, *, more: bool) -> None:
        """The run committed; ``more``: it stopped at its bound, run again at once if needed."""
        self.running, self.immediately, self.checked_offset = False, more, None

    def cancel(self) -> None:
        """Leadership lost: nothing scheduled, nothing running (Kafka's ``cancelDeferred``)."""
        self.due_ms, self.running, self.immediately, self.checked_offset = None, False, False, None

"""What one call of a ``ClassicGroup`` has done that its shell must act on: the parked
JoinGroup/SyncGroup requests it completed (in order), whether the group's GroupMetadata
record is to be written, and whether its state changed. The group collects them while the
call runs (``reset`` at its start) and hands them over as ``Effects``.

A request completed by the very call that parked it is answered directly instead: the call
takes it back out (``take_join``/``take_sync``).

Owned by its group; not thread-safe.
"""

from __future__ import annotations

from broker.group.values import (
    CompletedJoin,
    CompletedSync,
    Effects,
    JoinResponse,
    SyncResponse,
)

__all__ = ["Completions"]


class Completions:
    __slots__ = ("joins", "state_changed", "store_group", "syncs")

    def __init__(self) -> None:
        self.joins: list[CompletedJoin] = []
        self.syncs: list[CompletedSync] = []
        self.store_group = False
        self.state_changed = False

    def reset(self) -> None:
        self.joins = []
        self.syncs = []
        self.store_group = False
        self.state_changed = False

    def effects(self) -> Effects:
        return Effects(tuple(self.joins), tuple(self.syncs), self.store_group, self.state_changed)

    def take_join(self, member_id: str) -> JoinResponse | None:
        for index, each in enumerate(self.joins):
            if each.member_id == member_id:
                return self.joins.pop(index).response
        return None

    def take_sync(self, member_id: str) -> SyncResponse | None:
        for index, each in enumerate(self.syncs):
            if each.member_id == member_id:
                return self.syncs.pop(index).response
        return None

"""Test-only partitions with one deliberately broken rule: the simulator must catch each one.
Each is a subclass of the real ``Partition`` used by the simulator only, never product code.

- ``truncate-to-hw``: a follower truncates to its high watermark instead of where the leader's
  epochs say the logs diverge, on a diverging-epoch answer and whenever it becomes a follower
  of a new leader (the pre-KIP-101 rule): it drops acknowledged records beyond its high
  watermark, and if it is elected before it fetches them again they are lost.
- ``hw-ignores-isr``: the leader's high watermark is its own log end offset, as if the ISR
  did not matter: a record is acknowledged before any follower has it.
- ``no-pending-isr``: a shrink is applied to the leader's ISR at once, before the controller
  commits it (KIP-497's pending ISR ignored): the high watermark moves on without a replica the
  controller still counts in the ISR, which may be elected without the records.

And one broken *shell* (``shell.BrokerShell(forget_pending_isr=True)``):

- ``forget-pending-isr``: every failed or unanswered AlterPartition reverts the leader to its
  committed ISR (``isr_change_failed``), as ``broker.replication`` did when this simulator was
  written. An expansion whose answer is lost may have been committed: the leader then counts
  the high watermark without a replica the controller has in the ISR, and electing that
  replica loses records below the old high watermark (seed 3 of the default options found it).
  Kafka reverts only on INELIGIBLE_REPLICA / OPERATION_NOT_ATTEMPTED and retries lost requests.

``CATCHES`` names the invariants expected for each variant.
"""

from __future__ import annotations

from collections.abc import Callable

from replication.isr import IsrChange
from replication.partition import Partition


class TruncateToHighWatermark(Partition):
    def truncate_on_divergence(self, epoch: int, end_offset: int) -> int:
        target = min(self.high_watermark, self.log_end_offset)
        self.truncate_to(target)
        return target

    def make_follower(self, *, leader_id: int, leader_epoch: int, replicas: tuple[int, ...],
                      isr: tuple[int, ...], partition_epoch: int = 0, now_ms: int = 0) -> bool:
        changed = super().make_follower(leader_id=leader_id, leader_epoch=leader_epoch,
                                        replicas=replicas, isr=isr,
                                        partition_epoch=partition_epoch, now_ms=now_ms)
        if changed and self.leader_id >= 0:
            self.truncate_to(min(self.high_watermark, self.log_end_offset))
        return changed


class HighWatermarkIgnoresIsr(Partition):
    def maybe_advance_high_watermark(self) -> bool:
        if not self.is_leader or self.log_end_offset <= self.high_watermark:
            return False
        self.high_watermark = self.log_end_offset
        return True


class NoPendingIsr(Partition):
    def maybe_shrink_isr(self, now_ms: int, lag_max_ms: int) -> IsrChange | None:
        change = super().maybe_shrink_isr(now_ms, lag_max_ms)
        if change is not None:
            self.isr_state.isr = change.new_isr
            self.maybe_advance_high_watermark()
        return change


VARIANTS: dict[str, Callable[..., Partition]] = {
    "truncate-to-hw": TruncateToHighWatermark,
    "hw-ignores-isr": HighWatermarkIgnoresIsr,
    "no-pending-isr": NoPendingIsr,
    "forget-pending-isr": Partition,  # the shell is broken, not the partition
}

CATCHES = {
    # a truncated follower elected at once loses acknowledged records; one that fetches first
    # takes new batches at offsets already committed elsewhere
    "truncate-to-hw": ("AcknowledgedRecordsKept", "ConsistentCommittedData"),
    "hw-ignores-isr": ("AcknowledgedRecordsKept",),
    "no-pending-isr": ("ConsistentCommittedData", "AcknowledgedRecordsKept"),
    "forget-pending-isr": ("ConsistentCommittedData", "AcknowledgedRecordsKept"),
}


def partition_class(variant: str) -> Callable[..., Partition]:
    return Partition if variant == "real" else VARIANTS[variant]


def forgets_pending_isr(variant: str) -> bool:
    return variant == "forget-pending-isr"

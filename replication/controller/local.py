"""``LocalController``: the single-node ``Controller`` (``replication.controller.interface``).

A proposal is planned from the image (``replication.controller.planning``), appended to the
local metadata log as one batch and fsynced (``MetadataLog.append``), which applies it to the
image and publishes the delta to the image's listeners (the replica manager) before the call
returns: every proposal is committed when it is handed back. A planning refusal (a Kafka error)
or a failed append resolves the proposal with that error and writes nothing.

Owned by the broker's event loop; the metadata log is set by ``start`` (after it is replayed).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TypeVar

from protocol.codec import Message
from replication.controller.planning import PRODUCER_ID_BLOCK_SIZE, Plan, PlanningController
from replication.controller.proposal import Proposal
from replication.metadata.image import MetadataImage
from replication.metadata.log import MetadataLog

__all__ = ["PRODUCER_ID_BLOCK_SIZE", "LocalController"]

logger = logging.getLogger("samsa.replication.controller")

T = TypeVar("T")


class LocalController(PlanningController):
    metadata_log: MetadataLog | None = None

    def start(self, metadata_log: MetadataLog) -> None:
        self.metadata_log = metadata_log

    @property
    def image(self) -> MetadataImage:
        assert self.metadata_log is not None, "start() first"
        return self.metadata_log.image

    def propose(self, records: Sequence[Message]) -> Proposal[int]:
        """Append ``records`` as one batch (fsynced, applied); resolves with its last offset.
        The planned operations use it; records planned elsewhere may too."""
        assert self.metadata_log is not None, "start() first"
        try:
            return Proposal.committed(self.metadata_log.append(records))
        except Exception as error:
            logger.exception("appending %d record(s) to the metadata log failed", len(records))
            return Proposal.refused(error)

    def _plan_and_propose(self, plan: Plan[T], *, validate_only: bool = False) -> Proposal[T]:
        try:
            value, records = plan()
        except Exception as error:  # a Kafka refusal, or a bug the caller reports (and logs)
            return Proposal.refused(error)
        if validate_only or not records:
            return Proposal.committed(value)
        appended = self.propose(records)
        if appended.exception() is not None:
            return Proposal.refused(appended.exception())  # type: ignore[arg-type]
        return Proposal.committed(value)

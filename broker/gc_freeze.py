"""Keeping CPython's full garbage collections short as partitions grow (issue 18).

CPython's cyclic collector runs a full (generation 2) collection once the objects that survived
into generation 2 since the last one reach a quarter of the survivors then, and it walks every
tracked object while holding the GIL: with 10,000 partitions (~500,000 tracked objects) one
collection took up to 280 ms, stalling the event loop (and every client) in the middle of a
CreateTopics. The broker's long-lived state (logs, segments, indexes, partitions, the metadata
image) is freed by reference counting when a partition goes (no cycles:
``tests/unit/broker/test_gc_freeze.py``), so the collector gains nothing by walking it.

``LongLivedFreezer`` moves it out of the collector's sight with ``gc.freeze()`` (Python's
permanent generation, as Instagram's servers do it): once after start-up, and again whenever the
number of hosted partitions has grown by ``FREEZE_AFTER_NEW_PARTITIONS`` since the last freeze
(``tick``, on the event loop every second from the scheduler). Each freeze first collects the
young generations (a few milliseconds) so that fresh garbage is not frozen. Full collections then
walk only what was allocated since: their cost follows recent work, not the partition count.

Trade-off: a cyclic structure that was frozen and later dropped is never collected (it stays
allocated); the partition objects are not cyclic, and what start-up and admin work leave behind
is freed by reference counting. ``gc.unfreeze()`` is never called.

Owned by the broker's event loop (``gc.freeze`` is process-wide).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

__all__ = ["FREEZE_AFTER_NEW_PARTITIONS", "LongLivedFreezer"]

logger = logging.getLogger("samsa.broker.gc")

FREEZE_AFTER_NEW_PARTITIONS = 500


class LongLivedFreezer:
    def __init__(self, hosted_partitions: Callable[[], int],
                 *, after_new_partitions: int = FREEZE_AFTER_NEW_PARTITIONS) -> None:
        self.hosted_partitions = hosted_partitions
        self.after_new_partitions = after_new_partitions
        self._frozen_at_partitions = 0
        self.freezes = 0

    def freeze(self) -> None:
        """Collect the young generations, then freeze every object tracked now."""
        started = time.perf_counter()
        gc.collect(1)
        gc.freeze()
        self._frozen_at_partitions = self.hosted_partitions()
        self.freezes += 1
        # (not gc.get_freeze_count(): it walks the whole permanent generation)
        logger.debug("froze the long-lived objects with %d partitions hosted in %.1f ms",
                     self._frozen_at_partitions, (time.perf_counter() - started) * 1000)

    def tick(self) -> None:
        """Freeze again once enough partitions were added since the last time."""
        hosted = self.hosted_partitions()
        if hosted < self._frozen_at_partitions:  # deletions: count growth from here
            self._frozen_at_partitions = hosted
        elif hosted - self._frozen_at_partitions >= self.after_new_partitions:
            self.freeze()

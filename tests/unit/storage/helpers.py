"""Test helpers for storage: simulate a crash (no flush, no trim, no clean-shutdown work)."""

from __future__ import annotations

import os

from storage.log import Log
from storage.segment import LogSegment


def abandon_segment(segment: LogSegment) -> None:
    """Release a segment's OS resources the way a killed process does: nothing is trimmed."""
    if segment.closed:
        return
    segment.closed = True
    os.close(segment.fd)
    segment.offset_index.release()  # the process dies: no trim, no msync
    segment.time_index.release()


def crash(log: Log) -> None:
    """Drop ``log`` as a crash would; what reached the page cache stays on disk."""
    for segment in log.segments:
        abandon_segment(segment)
    for pending in log._pending_deletes:
        abandon_segment(pending.segment)

"""The clean-shutdown marker of a log directory: Kafka's ``CleanShutdownFileHandler``.

Layout: ``<log.dir>/.kafka_cleanshutdown``, present only between a clean stop and the next
start, holding one JSON object (KIP-966, Kafka 3.7+)::

    {"version":0,"brokerEpoch":1234}

``brokerEpoch`` is the broker epoch of the incarnation that stopped (-1: none, a node without a
controller). At the next start the broker sends it as the registration's
``previous_broker_epoch``: the controller takes an epoch equal to the registered one as proof of
a clean shutdown, and with eligible leader replicas on keeps the broker in the ELRs it was in.
A marker Kafka cannot parse (empty, as Samsa wrote it before, or not JSON) still means a clean
stop for log recovery, but proves no epoch: ``read_broker_epoch`` returns None, as Kafka's
``read`` returns empty.

The file is written with an fsync (Kafka's ``write``); the log manager owns it, on the thread
that stops or loads the directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["CLEAN_SHUTDOWN_FILE", "read_broker_epoch", "write_clean_shutdown"]

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_VERSION = 0


def write_clean_shutdown(directory: Path, broker_epoch: int) -> None:
    """Write the marker of ``directory`` with ``broker_epoch``, synced to disk."""
    content = json.dumps({"version": _VERSION, "brokerEpoch": broker_epoch},
                         separators=(",", ":")).encode()
    descriptor = os.open(directory / CLEAN_SHUTDOWN_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                         0o644)
    try:
        os.write(descriptor, content)
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_broker_epoch(directory: Path) -> int | None:
    """The broker epoch the marker of ``directory`` holds; None when it is missing, empty or
    not Kafka's JSON."""
    try:
        content = json.loads((directory / CLEAN_SHUTDOWN_FILE).read_bytes())
    except (OSError, ValueError):
        return None
    epoch = content.get("brokerEpoch") if isinstance(content, dict) else None
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None

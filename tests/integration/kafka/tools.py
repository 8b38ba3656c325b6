"""Helpers for the tests that run Apache Kafka's own command-line tools against Samsa.

``samsa_broker`` starts one real Samsa broker process for a whole test module (a tool's JVM
takes a second or two to start, so the tests share a broker and use distinct topic and group
names). ``kafka`` runs a tool through its main class (``compat.apache_kafka.run_tool``) and
fails with the tool's output when it exits non-zero; ``table`` reads the whitespace-aligned
tables the tools print (``kafka-consumer-groups --describe``, ``kafka-transactions``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from compat.apache_kafka import run_tool
from tests.integration.conftest import BrokerProcess

__all__ = ["create_topics", "kafka", "samsa_broker", "table"]

# Classic groups rebalance at once: the tools' consumers join a fresh group (Kafka's own test
# clusters set the same).
FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0"}


@contextmanager
def samsa_broker(directory: Path, **overrides: str) -> Iterator[BrokerProcess]:
    """A Samsa broker process for a test module; stopped cleanly (exit code 0) at its end."""
    broker = BrokerProcess(log_dir=directory / "logs", overrides={**FAST_GROUPS, **overrides},
                           stderr_path=directory / "broker.log").start()
    try:
        yield broker
    finally:
        if broker.alive():
            code = broker.stop()
            assert code == 0, f"broker exited with {code}\n{broker.log()[-3000:]}"


def kafka(tool: str, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
    """Run ``tool`` (``kafka-topics``, ...); its stdout, or an AssertionError with its output."""
    return run_tool(tool, *args, stdin=stdin, timeout=timeout, check=True).stdout


def table(text: str, *, separator: str | None = None) -> list[dict[str, str]]:
    """The rows of the first table in ``text`` (a header line in capitals, then rows), as dicts.
    ``separator``: a tab for the tab-separated tables, None for runs of spaces."""
    lines = [line for line in text.splitlines() if line.strip()]
    header_at = next(i for i, line in enumerate(lines) if re.match(r"^[A-Z][A-Za-z-]+\s", line))
    split = (lambda line: [cell.strip() for cell in line.split(separator)]) if separator else str.split
    header = [cell for cell in split(lines[header_at]) if cell]
    rows = []
    for line in lines[header_at + 1:]:
        cells = split(line)
        if separator:
            cells = cells[:len(header)]
        if len(cells) != len(header):
            break
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    """Create ``(name, partitions)`` topics through confluent-kafka's AdminClient."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics],
                                  operation_timeout=30)
    for future in futures.values():
        future.result(30)

"""``ShareConsumer.commit_sync`` when the broker dies before answering: the partition's error
says the outcome is unknown (``BrokerUnreachableError``), not NOT_LEADER_OR_FOLLOWER "no share
session to carry the acknowledgements", which means never sent. The fault harness's queue
workload (tests/faults/workload_queue.py) logs the first as ``info`` and the second as
``fail``; before this, a ShareAcknowledge lost with its broker read as never sent, while the
broker had persisted the ACCEPT (found by ``python -m tests.faults --case queue``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa import AcknowledgeType, ShareConsumer
from samsa.errors import BrokerUnreachableError
from tests.integration import share_scenarios
from tests.integration.conftest import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # ~15 s: a broker of its own


def test_an_acknowledgement_whose_answer_is_lost_is_not_reported_as_never_sent(
        tmp_path: Path) -> None:
    broker = BrokerProcess(log_dir=tmp_path / "logs",
                           overrides={"group.share.heartbeat.interval.ms": "1000"},
                           stderr_path=tmp_path / "broker.log").start()
    try:
        share_scenarios.prepare(broker.bootstrap, "jobs", "workers", 1)
        share_scenarios.produce(broker.bootstrap, "jobs", 3, 1)
        consumer = ShareConsumer("jobs", bootstrap_servers=broker.bootstrap, group_id="workers",
                                 share_acknowledgement_mode="explicit", fetch_max_wait_ms=200,
                                 request_timeout_ms=3000)
        got: list[object] = []
        share_scenarios.poll_until([consumer], lambda: bool(got),
                                   lambda _, records: got.extend(records))
        for record in got:
            consumer.acknowledge(record, AcknowledgeType.ACCEPT)  # type: ignore[arg-type]
        broker.kill()
        result = consumer.commit_sync()
        assert result, "no partition answered"
        assert all(isinstance(error, BrokerUnreachableError) for error in result.values()), result
        consumer.close(timeout=1)  # the broker is gone: give up at once
    finally:
        if broker.alive():
            broker.kill()

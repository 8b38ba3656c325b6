"""The replication data plane under the simulator (``tests.simulation.replication``): many short
seeds, every seed that ever failed, and proof that the checks catch a broken rule.

- ``test_seeds``: ``SEED_COUNT`` seeds (8 simulated seconds of faults each, then recovery),
  3 brokers (5 on every fourth seed), 2 partitions (1 on every third), every fault on; in
  chunks so a failure names its seeds. About 45 ms per seed on one core (~45 s in all).
- ``test_regression``: each seed that ever failed, by name.
- ``test_broken_rule_is_caught``: each ``broken`` variant fails with its named invariant within
  a bounded range of seeds.

Replay any failure: ``python -m tests.simulation.replication --seed N ...`` (the message prints
the line).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.simulation.replication import broken
from tests.simulation.replication.options import ReplicationOptions
from tests.simulation.replication.simulator import SimulationResult, run_seed

SEED_COUNT = 1000
CHUNK = 100


@pytest.fixture(autouse=True)
def quiet_storage() -> Iterator[None]:
    """The storage layer logs every truncation; the simulator's trace has them."""
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def seed_options(seed: int) -> ReplicationOptions:
    return ReplicationOptions(seed, brokers=5 if seed % 4 == 3 else 3,
                              partitions=1 if seed % 3 == 2 else 2)


def failures(results: list[SimulationResult]) -> str:
    return "\n\n".join(result.failure.report() for result in results if result.failure)


@pytest.mark.parametrize("first", range(0, SEED_COUNT, CHUNK),
                         ids=lambda first: f"seeds-{first}-{first + CHUNK - 1}")
def test_seeds(first: int) -> None:
    results = [run_seed(seed_options(seed)) for seed in range(first, first + CHUNK)]
    assert all(result.ok for result in results), failures(results)


REGRESSIONS = {
    # a former leader kept an epoch it assigned at its log end but never wrote; truncate_to at
    # the log end left it in the cache, so the follower looped on one diverging epoch (Liveness)
    "empty-epoch-at-log-end": ReplicationOptions(36),
    # a lost AlterPartition answer reverted a committed expansion: the high watermark moved
    # without a replica the controller kept in the ISR, then elected (ConsistentCommittedData)
    "lost-expansion-answer": ReplicationOptions(3),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regression(name: str) -> None:
    result = run_seed(REGRESSIONS[name])
    assert result.ok, failures([result])


# Each variant and how many seeds (from 0) may pass before it is caught.
BROKEN = {
    "truncate-to-hw": 80,
    "hw-ignores-isr": 10,
    "no-pending-isr": 30,
    "forget-pending-isr": 10,
}


@pytest.mark.parametrize("variant", sorted(BROKEN))
def test_broken_rule_is_caught(variant: str) -> None:
    for seed in range(BROKEN[variant]):
        result = run_seed(ReplicationOptions(seed, variant=variant))
        if result.failure is not None:
            assert result.failure.invariant in broken.CATCHES[variant], result.failure.report()
            assert f"--variant {variant}" in result.failure.replay
            return
    pytest.fail(f"{variant}: no seed in 0-{BROKEN[variant] - 1} caught it")


def test_a_seed_replays_exactly() -> None:
    first, second = run_seed(seed_options(7)), run_seed(seed_options(7))
    assert first.ok and second.ok
    assert (first.trace_digest, first.events, first.sim_ms, first.acknowledged) == \
        (second.trace_digest, second.events, second.sim_ms, second.acknowledged)
    assert first.events > 0 and first.acknowledged > 0
    assert run_seed(seed_options(8)).trace_digest != first.trace_digest


def test_failure_report_has_the_invariant_trace_and_one_line_replay() -> None:
    result = run_seed(ReplicationOptions(1, variant="hw-ignores-isr"))
    assert result.failure is not None
    report = result.failure.report()
    assert report.startswith("INVARIANT VIOLATED: AcknowledgedRecordsKept")
    assert result.failure.trace
    assert report.splitlines()[-1] == (
        "replay: python -m tests.simulation.replication --seed 1 --brokers 3 --partitions 2 "
        "--sim-seconds 8 --faults crash,lossy,pause,partition,drop,duplicate,reorder,elect "
        "--variant hw-ignores-isr")

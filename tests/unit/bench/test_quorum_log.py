"""``bench.quorum_log``: a failover's detection and election read from the survivors' logs."""

from __future__ import annotations

from bench.quorum_log import (
    FailoverPhases,
    LeaderChange,
    failover_phases,
    leader_changes,
    log_time_s,
    unfenced_times,
)

LOG = """\
2026-11-26 00:31:56,934 INFO samsa.broker.quorum: metadata quorum epoch 9: leader 3
2026-11-26 00:31:56,934 INFO samsa.replication.controller: controller 3 leads epoch 9
2026-11-26 00:31:59,070 INFO samsa.broker.quorum: metadata quorum epoch 10: leader unknown
2026-11-26 00:31:59,078 INFO samsa.broker.quorum: metadata quorum epoch 11: leader unknown
2026-11-26 00:32:00,825 INFO samsa.broker.quorum: metadata quorum epoch 11: leader 1
2026-11-26 00:32:01,000 WARNING samsa.storage.log: truncated __cluster_metadata-0 to offset 777
2026-11-26 00:32:02,500 INFO samsa.broker.lifecycle: broker 2 unfenced
2026-11-26 00:32:03,500 INFO samsa.broker.lifecycle: broker 12 unfenced
"""


def test_leader_changes_are_read_with_their_times() -> None:
    changes = leader_changes(2, LOG)
    assert [(c.epoch, c.leader_id) for c in changes] == [(9, 3), (10, None), (11, None), (11, 1)]
    assert {c.node_id for c in changes} == {2}
    assert abs(changes[1].at_s - changes[0].at_s - 2.136) < 1e-6
    assert changes[0].at_s == log_time_s("2026-11-26 00:31:56,934")


def test_unfenced_lines_of_that_broker_only() -> None:
    assert unfenced_times(2, LOG) == [log_time_s("2026-11-26 00:32:02,500")]
    assert unfenced_times(3, LOG) == []


def change(at_s: float, node_id: int, epoch: int, leader_id: int | None) -> LeaderChange:
    return LeaderChange(at_s, node_id, epoch, leader_id)


def test_detection_then_election_over_several_epochs() -> None:
    changes = [
        change(99.0, 2, 9, 3),  # before the kill
        change(101.9, 3, 10, None),  # the killed leader's own line: ignored
        change(102.0, 2, 10, None), change(102.01, 1, 10, None),
        change(102.5, 1, 11, None), change(103.2, 1, 11, 1), change(103.21, 2, 11, 1),
    ]
    phases = failover_phases(changes, killed_at_s=100.0, old_epoch=9, old_leader=3)
    assert phases.new_leader == 1 and phases.epochs == 2
    assert abs(phases.detection_s - 2.0) < 1e-9  # type: ignore[operator]
    assert abs(phases.election_s - 1.2) < 1e-9  # type: ignore[operator]


def test_a_line_a_millisecond_early_is_the_truncated_clock() -> None:
    changes = [change(99.9995, 1, 5, None), change(100.05, 1, 5, 1)]
    phases = failover_phases(changes, killed_at_s=100.0, old_epoch=4, old_leader=2)
    assert phases.detection_s == 0.0 and phases.epochs == 1


def test_no_lines_no_phases() -> None:
    assert failover_phases([], killed_at_s=1.0, old_epoch=1, old_leader=1) == FailoverPhases(
        None, None, None, None)
    standing_only = [change(3.0, 2, 2, None)]
    phases = failover_phases(standing_only, killed_at_s=1.0, old_epoch=1, old_leader=1)
    assert phases == FailoverPhases(2.0, None, None, None)
    assert phases.to_json() == {"detection_s": 2.0, "election_s": None, "epochs": None,
                                "new_leader": None, "later_elections": None}


def test_elections_after_the_new_leader_until_the_cluster_took_a_write() -> None:
    changes = [
        change(102.0, 2, 10, None), change(103.0, 1, 10, 1), change(103.01, 2, 10, 1),
        change(105.0, 2, 11, None), change(105.3, 2, 12, None), change(105.5, 2, 12, 1),
        change(200.0, 2, 13, None),  # long after the write: another story
    ]
    phases = failover_phases(changes, killed_at_s=100.0, old_epoch=9, old_leader=3,
                             until_s=106.0)
    assert (phases.epochs, phases.new_leader, phases.later_elections) == (1, 1, 2)
    calm = failover_phases(changes[:3], killed_at_s=100.0, old_epoch=9, old_leader=3,
                           until_s=106.0)
    assert calm.later_elections == 0

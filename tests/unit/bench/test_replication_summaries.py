"""``bench.replication_failover.summarize`` and ``bench.replication_throughput.merge_lags``: the
figures the replication bench reports, from kills and rounds built here (no cluster)."""

from __future__ import annotations

from bench.replication_failover import GOAL_P99_S, Kill, Writer, summarize
from bench.replication_throughput import merge_lags


def kill(failover_s: float | None, *, controller: bool = False,
         rejoin_isr_s: float | None = 1.0) -> Kill:
    return Kill(killed=1, was_controller=controller, topic="failover-0", failover_s=failover_s,
                new_leader_s=None if failover_s is None else failover_s / 2, new_leader=2,
                rejoin_isr_s=rejoin_isr_s, new_topic_after=rejoin_isr_s is None,
                writer_errors={})


def test_the_goal_is_the_nearest_rank_p99_of_every_kill() -> None:
    summary = summarize(9000, [kill(2.0), kill(3.0, controller=True), kill(GOAL_P99_S)])
    assert summary["distributions"]["failover_s"]["p99"] == GOAL_P99_S
    assert summary["goal_met"] is True
    assert summary["controller_kills"] == 1
    assert summary["missing"] == {"failover_s": 0, "new_leader_s": 0, "rejoin_isr_s": 0}


def test_a_kill_that_never_recovered_fails_the_goal_whatever_the_others() -> None:
    summary = summarize(3000, [kill(1.0), kill(None, rejoin_isr_s=None)])
    assert summary["goal_met"] is False
    assert summary["distributions"]["failover_s"]["count"] == 1
    assert summary["missing"]["failover_s"] == 1
    assert summary["missing"]["rejoin_isr_s"] == 1
    assert summary["by_kill"][1]["new_topic_after"] is True


def test_only_writes_sent_after_the_kill_count() -> None:
    writer = Writer("127.0.0.1:1", "t")  # never started: no producer, no socket
    writer.acked.extend([(1.0, 5.0), (2.5, 4.0), (3.0, 3.5)])
    assert writer.first_ack_sent_after(2.0) == 3.5
    assert writer.first_ack_sent_after(3.0) is None


def test_merged_lags_are_the_spread_of_the_rounds() -> None:
    def lag(median: float, p99: float, top: float) -> dict[str, object]:
        shape = {"median": median, "p99": p99, "max": top}
        return {"samples": 10, "records": shape, "ms": shape}

    merged = merge_lags([lag(1, 5, 9), lag(3, 7, 20), {"samples": 0}])
    assert merged["rounds"] == 2 and merged["samples"] == 20
    assert merged["records_max"] == {"median": 14.5, "min": 9, "max": 20, "rounds": 2}
    assert merge_lags([]) == {"rounds": 0}

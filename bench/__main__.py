"""``python -m bench`` (``make bench``): every benchmark, one after the other (the Spark one
needs Java 17), each comparison in interleaved rounds (``bench.rounds``).

Apache Kafka 4.3.1 (``compat.apache_kafka``: Java 17 and Maven fetch it on first use) is in
every table where it runs: a peer in the broker bench (throughput, CPU, memory, start-up), its
own ``kafka-producer-perf-test`` / ``kafka-consumer-perf-test`` against Samsa and Kafka
(``bench.kafka_perf``), Spark's ``format("kafka")`` on both in the Spark bench, a Kafka column
in the scaling bench, and three Kafka nodes against three Samsa nodes (``bench.kafka_cluster``,
after the replication bench).

``python -m bench --quick`` runs each with smaller counts; ``--rounds N`` sets the rounds of
every comparison (5 by default). The cluster bench (``bench.cluster``: topic creations through
the quorum, controller failover) and the Raft simulator's time compression (``bench.raft_sim``)
run next, then the replication bench (``bench.replication``: acks=all RF 3 against acks=1
RF 1, the followers' lag, partition leader failover), then the durability bench
(``bench.durability``: flush.messages=1 with group commit against the default flush).
"""

from __future__ import annotations

import argparse

from bench import (
    broker,
    client_perf,
    cluster,
    consumer_perf,
    durability,
    groups,
    kafka_cluster,
    kafka_perf,
    raft_sim,
    replication,
    rounds,
    scale,
    spark,
    storage,
)

if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller counts, for smoke runs")
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS,
                        help="interleaved rounds per comparison (default 5)")
    arguments = parser.parse_args()
    quick, count = arguments.quick, arguments.rounds
    storage.main(mib=64 if quick else 512, rounds_count=count)
    broker.main(quick=quick, rounds_count=count)
    kafka_perf.main(quick=quick, rounds_count=count)  # Kafka's own perf tools on both brokers
    groups.main(quick=quick, rounds_count=count)
    client_perf.main(num_records=30_000 if quick else 300_000, rounds_count=count)
    consumer_perf.main(num_records=50_000 if quick else 500_000, rounds_count=count)
    spark.main(quick=quick, rounds_count=count)
    scale.main(quick=quick)  # one node at 1k / 10k / 50k partitions (issue 18)
    cluster.main(quick=quick, rounds_count=count)
    raft_sim.main(quick=quick, rounds_count=count)
    replication.main(quick=quick, rounds_count=count)  # issue 12
    kafka_cluster.main(quick=quick, rounds_count=count)  # acks=all RF 3: 3 Kafka vs 3 Samsa
    durability.main(quick=quick, rounds_count=count)  # issue 13: flush.messages=1 vs default

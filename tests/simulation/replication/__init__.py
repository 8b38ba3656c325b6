"""The deterministic simulation of the replication data plane (partition replication: the
follower fetch, the high watermark, the ISR with AlterPartition, acks=all, clean elections).

One process runs N brokers (3, or 5), each holding real ``replication.partition.Partition``
objects over real ``storage.log.Log`` files in a per-run directory, a controller made of the
real controller planners over a ``MetadataImage`` (no Raft: ``controller``), and an acks=all
producer (``client``), on a simulated clock driven by one event queue. Every random choice
comes from the seed, so a seed is a one-line replay:
``python -m tests.simulation.replication --seed N``.

Modules: ``options`` (what a run is, the scaled Kafka settings), ``controller`` (the controller
model), ``broker`` (one broker's files and memory, crash and power loss), ``shell`` (what the
daemon's fetcher, Fetch / Produce handlers and ISR sender do), ``client`` (the producer),
``invariants`` (the four checks), ``simulator`` (the loop, the network, faults, recovery),
``broken`` (partitions with a deliberately broken rule, to prove the checks catch them).
"""

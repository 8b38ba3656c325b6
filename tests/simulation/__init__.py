"""The deterministic simulation of the KRaft quorum (Kafka's RaftEventSimulationTest is the model).

One process runs N voters (and optional observers), each a real ``replication.raft.RaftNode`` over
a ``MemoryRaftLog`` and a ``MemoryQuorumStateStore``, on a simulated clock (integer ms) driven by
one event queue ordered by (time, sequence). Every random choice (network delay, drop,
duplicate, reorder, partitions, crashes, the workload, each node's own rng) comes from the seed,
so a seed is a one-line replay: ``python -m tests.simulation --seed N ...``.

Modules: ``options`` (what a run is: seed, voters, faults), ``network`` (the lossy in-memory
network), ``cluster`` (a simulated node: its log, store, state machine, incarnation),
``invariants`` (the checks, named as Kafka's), ``simulator`` (the event loop, faults, workload),
``broken`` (test-only cores with a deliberately broken rule, to prove the checks catch them).
"""

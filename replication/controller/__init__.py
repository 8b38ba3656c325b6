"""The controller: every write to ``__cluster_metadata`` goes through it.

``Controller`` (``replication.controller.interface``) is what the broker's handlers and
coordinators call; ``LocalController`` (``replication.controller.local``) is the single-node
implementation, ``QuorumController`` (``replication.controller.quorum``) a KRaft cluster's, with
``periodic`` scheduling its auto leader rebalance and unclean elections. The planners it runs are the sans-IO ``plan_*`` functions of
``replication.metadata`` (topics, configs, ACLs, SCRAM) and, for a cluster, of this package:
``placement`` (replica placement), ``heartbeats`` (broker sessions), ``cluster_control``
(registration, heartbeats, fencing, controlled shutdown, unregistration), ``partition_change``
(Kafka's PartitionChangeBuilder), ``alter_partition`` (KIP-497), ``elections`` (ElectLeaders,
auto leader rebalance, unclean elections) and ``reassignment`` (KIP-455).
"""

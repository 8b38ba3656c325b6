"""KRaft's quorum protocol over ``__cluster_metadata-0`` (see ``replication.raft.log``)."""

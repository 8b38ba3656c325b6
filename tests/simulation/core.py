"""The Raft core's names the simulator uses, imported in one place (``replication.raft``)."""

from __future__ import annotations

from replication.raft.config import RaftConfig
from replication.raft.errors import NotLeaderError
from replication.raft.log import SnapshotId
from replication.raft.memory_log import MemoryRaftLog
from replication.raft.node import RaftNode, RaftRequest, RaftResponse, Send
from replication.raft.quorum_state import MemoryQuorumStateStore

__all__ = ["MemoryQuorumStateStore", "MemoryRaftLog", "NotLeaderError", "RaftConfig", "RaftNode",
           "RaftRequest", "RaftResponse", "Send", "SnapshotId"]

"""The replica manager moved to ``replication.replica_manager`` (it needs nothing from
``broker``); this name stays for the modules that still import it from here."""

from replication.replica_manager import ReplicaManager

__all__ = ["ReplicaManager"]

"""The controller: every write to ``__cluster_metadata`` goes through it.

``Controller`` (``replication.controller.interface``) is what the broker's handlers and
coordinators call; ``LocalController`` (``replication.controller.local``) is the single-node
implementation. The planners it runs are the sans-IO ``plan_*`` functions of
``replication.metadata``.
"""

"""KRaft's quorum protocol as a sans-IO core (Kafka's ``raft/`` module, KIP-595, KIP-630).

``RaftNode`` (``node``) is the client: stepped by ``handle_request`` / ``handle_response`` /
``poll`` with the time passed in, it queues ``Send``s and never touches a socket, a clock, a
thread or a file itself; the log (``RaftLog``), the quorum-state store and the random number
generator are injected. One module per role (``unattached``, ``voted``, ``candidate``,
``leader``, ``follower``, ``resigned``) holds that role's state and timers.
"""

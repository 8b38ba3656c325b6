"""Stand-in for kafka-python's ``test/service.py``, which its sdist leaves out.

``make compat`` copies this file to ``test/service.py`` inside the unpacked
kafka-python sdist. The suite then runs with ``KAFKA_URI`` set, so its
``KafkaFixture`` wraps the already-running Samsa broker in an
``ExternalService`` and never spawns a process: ``SpawnedService`` exists only
so ``test.integration.fixtures`` imports, and refuses to start.
"""

import logging

log = logging.getLogger(__name__)


class ExternalService:
    """A broker someone else started: nothing to start, stop or log."""

    def __init__(self, host, port):
        log.info("Using already running service at %s:%d", host, port)
        self.host = host
        self.port = port

    def start(self):
        pass

    def stop(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return True

    def dump_logs(self):
        pass


class SpawnedService:
    """Would run a Kafka or ZooKeeper JVM; Samsa's compat run never does."""

    def __init__(self, args=None, env=None):
        self.args = args
        self.env = env

    def start(self):
        raise RuntimeError(
            "compat: the suite tried to spawn a JVM broker; run it with KAFKA_URI "
            "pointing at the Samsa broker (compat/run.py does)")

    def stop(self):
        pass

    def wait_for(self, pattern, timeout=30):
        return False

    def dump_logs(self):
        pass

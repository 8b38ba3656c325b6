"""``RaftConfig``: the controller quorum's timing knobs, Kafka's names and defaults.

Each field is the ``controller.quorum.*`` key of the same name (``_ms`` for ``.ms``);
``fetch_max_wait_ms`` is KafkaRaftClient's fixed MAX_FETCH_WAIT_MS and ``fetch_max_bytes``
its MAX_FETCH_SIZE_BYTES. A value, owned by whoever builds the node.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RaftConfig"]


@dataclass(frozen=True, slots=True)
class RaftConfig:
    election_timeout_ms: int = 1000  # controller.quorum.election.timeout.ms
    fetch_timeout_ms: int = 2000  # controller.quorum.fetch.timeout.ms
    election_backoff_max_ms: int = 1000  # controller.quorum.election.backoff.max.ms
    request_timeout_ms: int = 2000  # controller.quorum.request.timeout.ms
    retry_backoff_ms: int = 20  # controller.quorum.retry.backoff.ms
    append_linger_ms: int = 25  # controller.quorum.append.linger.ms
    fetch_max_wait_ms: int = 500  # KafkaRaftClient.MAX_FETCH_WAIT_MS
    fetch_max_bytes: int = 8 * 1024 * 1024  # KafkaRaftClient.MAX_FETCH_SIZE_BYTES

    def __post_init__(self) -> None:
        for name in (
            "election_timeout_ms",
            "fetch_timeout_ms",
            "request_timeout_ms",
            "fetch_max_bytes",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for name in (
            "election_backoff_max_ms",
            "retry_backoff_ms",
            "append_linger_ms",
            "fetch_max_wait_ms",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that hears from no majority of voters this long resigns (1.5 x fetch timeout)."""
        return self.fetch_timeout_ms * 3 // 2

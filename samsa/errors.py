"""The errors Samsa's client raises.

Two families:

- ``KafkaError`` and its one-subclass-per-code family (re-exported from
  ``protocol.errors``): the broker answered with that error code. ``retriable``
  says whether trying again may succeed.
  ``OffsetConflictError`` (Samsa's own code, OFFSET_CONFLICT) fails a conditional append
  whose condition did not hold; ``current_offset`` is the actual offset.
- ``ClientError``: something went wrong on this side of the wire: a bad
  configuration, a broker that cannot be reached, a timeout, a closed client.
  ``ClientError`` subclasses ``KafkaError`` too, so ``except KafkaError`` catches
  every failure the client reports.
"""

from __future__ import annotations

import protocol.errors as _protocol_errors
from protocol.errors import ERRORS, ErrorCode, KafkaError, OffsetConflictError, error_for_code

__all__ = [
    "ERRORS",
    "BrokerUnreachableError",
    "ClientClosedError",
    "ClientError",
    "CommitFailedError",
    "ConfigError",
    "ErrorCode",
    "IllegalStateError",
    "KafkaError",
    "KafkaTimeoutError",
    "NoBrokersAvailableError",
    "NoOffsetForPartitionError",
    "OffsetConflictError",
    "error_for_code",
    "raise_for_code",
]


class ClientError(KafkaError):
    """A failure on the client's side (no broker error code)."""


class ConfigError(ClientError, ValueError):
    """A configuration key is unknown, or its value is invalid: ``key``, ``value``, ``reason``."""

    def __init__(self, key: str, value: object, reason: str) -> None:
        self.key = key
        self.value = value
        self.reason = reason
        super().__init__(f"invalid config {key}={value!r}: {reason}")


class BrokerUnreachableError(ClientError):
    """A connection to ``address`` could not be opened or was lost."""

    retriable = True

    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        super().__init__(f"broker {address} unreachable: {reason}")


class NoBrokersAvailableError(ClientError):
    """None of the bootstrap servers (or known brokers) answered."""

    retriable = True


class KafkaTimeoutError(ClientError):
    """An operation did not complete within its time limit."""

    retriable = True


class ClientClosedError(ClientError):
    """The producer, consumer or admin client was used after ``close()``."""


class CommitFailedError(ClientError):
    """An offset commit was refused because the group rebalanced (the member's generation or
    id is no longer current): the partitions may belong to another member now (Java's
    CommitFailedException)."""


class IllegalStateError(ClientError):
    """A call the client's state does not allow (Java's IllegalStateException): e.g. a share
    consumer's ``poll()`` while records of the previous poll are unacknowledged in explicit
    acknowledgement mode, or ``acknowledge()`` in implicit mode."""


class NoOffsetForPartitionError(ClientError):
    """A partition has no committed offset and ``auto.offset.reset`` is ``none``."""

    def __init__(self, partitions: object) -> None:
        self.partitions = partitions
        super().__init__(f"no committed offset and auto.offset.reset=none for {partitions}")


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the exception for a nonzero Kafka error code; do nothing for 0."""
    if code:
        raise error_for_code(code)(message)


def __getattr__(name: str) -> type[KafkaError]:
    """``samsa.errors.UnknownTopicOrPartitionError`` and every other per-code class."""
    found = getattr(_protocol_errors, name, None)
    if isinstance(found, type) and issubclass(found, KafkaError):
        return found
    raise AttributeError(f"module 'samsa.errors' has no attribute {name!r}")

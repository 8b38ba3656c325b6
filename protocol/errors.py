"""Kafka error codes, one exception class per code.

PLACEHOLDER: a minimal subset; replaced by the full generated table (issue #3).
Class names: CamelCase of Kafka's code name plus ``Error`` (unless it already ends in Error).
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base of every error that has a Kafka error code."""

    code: int = -1
    retriable: bool = False


class UnknownServerError(KafkaError):
    code = -1


class OffsetOutOfRangeError(KafkaError):
    code = 1


class CorruptMessageError(KafkaError):
    code = 2
    retriable = True


class MessageTooLargeError(KafkaError):
    code = 10


class KafkaStorageError(KafkaError):
    code = 56
    retriable = True


class InvalidRecordError(KafkaError):
    code = 87

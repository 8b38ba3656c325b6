"""Batch validation: the errors and the records they name."""

from __future__ import annotations

import pytest

from protocol.errors import CorruptMessageError, InvalidRecordError, MessageTooLargeError
from protocol.records import Record, encode_batch
from storage.validator import RecordValidationError, ValidationRules, validate_batches

NOW = 1_700_000_000_000


def batch(keys: list[bytes | None]) -> bytes:
    return encode_batch([Record(i, NOW, key, b"v") for i, key in enumerate(keys)], base_offset=0)


def test_keyless_records_on_a_compacted_topic_are_named_by_batch_index() -> None:
    rules = ValidationRules(max_message_bytes=10**6, require_keys=True)
    with pytest.raises(RecordValidationError) as raised:
        validate_batches(batch([b"a", None, b"c", None]), rules, now_ms=NOW)
    assert [index for index, _ in raised.value.record_errors] == [1, 3]
    assert isinstance(raised.value, InvalidRecordError)


def test_keyed_records_pass_on_a_compacted_topic() -> None:
    rules = ValidationRules(max_message_bytes=10**6, require_keys=True)
    validated = validate_batches(batch([b"a", b"b"]), rules, now_ms=NOW)
    assert validated.records_count == 2


def test_bad_crc_and_oversize_get_their_own_codes() -> None:
    data = bytearray(batch([b"a"]))
    data[-1] ^= 1
    with pytest.raises(CorruptMessageError):
        validate_batches(data, ValidationRules(max_message_bytes=10**6), now_ms=NOW)
    with pytest.raises(MessageTooLargeError):
        validate_batches(batch([b"a"]), ValidationRules(max_message_bytes=10), now_ms=NOW)

"""The table of Kafka error codes and its exception classes."""

from __future__ import annotations

import inspect
import pickle

import pytest

from protocol import errors
from protocol.errors import ERRORS, ErrorCode, KafkaError, error_for_code

# kafka-python 3.0.12 reads its schemas with deprecated importlib.resources calls.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def class_name(code_name: str) -> str:
    camel = "".join(part.capitalize() for part in code_name.split("_"))
    return camel if camel.endswith("Error") else camel + "Error"


SAMSA_CODES = {10000}  # OFFSET_CONFLICT: Samsa's own, far outside Kafka's range


def test_the_table_runs_from_unknown_server_error_to_the_highest_code() -> None:
    codes = sorted(code.value for code in ErrorCode if code.value not in SAMSA_CODES)
    assert codes[0] == -1 and codes[1] == 0 and codes[-1] == 133  # Kafka 4.3.1's highest
    assert set(range(-1, 134)) - set(codes) == {99}  # unassigned in Kafka too
    assert set(ERRORS) == set(codes) - {0} | SAMSA_CODES


def test_offset_conflict_is_samsas_and_carries_the_current_offset() -> None:
    error = error_for_code(10000)("expected 3", current_offset=7)  # type: ignore[call-arg]
    assert isinstance(error, errors.OffsetConflictError)
    assert (error.name, error.retriable, error.current_offset) == ("OFFSET_CONFLICT", False, 7)
    assert error_for_code(10000)().current_offset == -1  # type: ignore[attr-defined]


def test_every_nonzero_code_has_a_class_named_after_it() -> None:
    for code in ErrorCode:
        if code == ErrorCode.NONE:
            continue
        cls = getattr(errors, class_name(code.name))
        assert ERRORS[code] is cls
        assert (cls.code, cls.name) == (code, code.name)
        assert issubclass(cls, KafkaError) and cls.default_message


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("UNKNOWN_SERVER_ERROR", errors.UnknownServerError),
        ("OFFSET_OUT_OF_RANGE", errors.OffsetOutOfRangeError),
        ("CORRUPT_MESSAGE", errors.CorruptMessageError),
        ("KAFKA_STORAGE_ERROR", errors.KafkaStorageError),
        ("INVALID_RECORD", errors.InvalidRecordError),
        ("MESSAGE_TOO_LARGE", errors.MessageTooLargeError),
        ("INVALID_TOPIC_EXCEPTION", errors.InvalidTopicExceptionError),
        ("NOT_LEADER_OR_FOLLOWER", errors.NotLeaderOrFollowerError),
    ],
)
def test_class_names(name: str, cls: type[KafkaError]) -> None:
    assert ERRORS[ErrorCode[name]] is cls


@pytest.mark.parametrize(
    ("cls", "retriable"),
    [
        (errors.UnknownServerError, False),
        (errors.CorruptMessageError, True),  # CorruptRecordException is a RetriableException
        (errors.NotLeaderOrFollowerError, True),
        (errors.RequestTimedOutError, True),
        (errors.KafkaStorageError, True),
        (errors.NotControllerError, True),
        (errors.InvalidRecordError, False),
        (errors.MessageTooLargeError, False),
        (errors.UnsupportedVersionError, False),
        (errors.InvalidShareSessionEpochError, True),
    ],
)
def test_retriable_flags_are_kafkas(cls: type[KafkaError], retriable: bool) -> None:
    assert cls.retriable is retriable


def test_retriable_flags_agree_with_kafka_python() -> None:
    import kafka.errors

    theirs = {
        cls.errno: bool(cls.retriable)
        for _, cls in inspect.getmembers(kafka.errors, inspect.isclass)
        if issubclass(cls, kafka.errors.BrokerResponseError) and cls.errno is not None
    }
    # kafka-python marks CORRUPT_MESSAGE not retriable; Kafka's CorruptRecordException
    # extends RetriableException, and this table follows Kafka.
    disagree = {
        code for code, cls in ERRORS.items() if code in theirs and theirs[code] != cls.retriable
    }
    assert disagree == {ErrorCode.CORRUPT_MESSAGE}
    assert len(set(ERRORS) & set(theirs)) >= 120


def test_error_for_code() -> None:
    assert error_for_code(56) is errors.KafkaStorageError
    assert error_for_code(-1) is errors.UnknownServerError
    assert error_for_code(9999) is errors.UnknownServerError  # as Kafka's Errors.forCode
    with pytest.raises(ValueError):
        error_for_code(0)


def test_messages() -> None:
    assert str(errors.OffsetOutOfRangeError()) == errors.OffsetOutOfRangeError.default_message
    error = errors.InvalidRecordError("batch 3 has no records")
    assert (error.message, str(error)) == ("batch 3 has no records", "batch 3 has no records")
    assert repr(error) == "InvalidRecordError('batch 3 has no records')"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is errors.InvalidRecordError and copy.message == error.message


def test_errors_are_caught_by_their_base() -> None:
    with pytest.raises(KafkaError) as raised:
        raise errors.NotCoordinatorError()
    assert raised.value.code == 16 and raised.value.retriable


def test_a_subclass_without_a_code_is_not_registered_and_codes_stay_unique() -> None:
    class Specific(errors.InvalidRequestError):
        pass

    assert ERRORS[ErrorCode.INVALID_REQUEST] is errors.InvalidRequestError
    assert Specific.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(TypeError, match="already bound"):

        class Duplicate(KafkaError):
            code = ErrorCode.INVALID_REQUEST


def test_the_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        ERRORS[1] = errors.UnknownServerError  # type: ignore[index]

"""Kafka's error codes: the ``ErrorCode`` table and one exception class per nonzero code.

The codes, names, retriable flags and default messages are Apache Kafka's
(``org.apache.kafka.common.protocol.Errors``, the 4.0 line, codes -1 through 128;
code 99 is unassigned in Kafka too). A code is "retriable" exactly when Kafka's
exception for it derives from ``RetriableException``.

Samsa's own codes start at 10000, far outside Kafka's range, and only Samsa's own APIs
(API keys from 10000) answer them, so a Kafka client never meets one:

- ``OFFSET_CONFLICT`` (10000, not retriable): SamsaConditionalProduce's condition did not
  hold (the partition's log end offset, or the offset of the last record with the key, is not
  the one expected); nothing was appended. ``current_offset`` is the actual offset.

Class names are the CamelCase of Kafka's code name plus ``Error`` unless that
already ends in ``Error``: ``OFFSET_OUT_OF_RANGE`` -> ``OffsetOutOfRangeError``,
``KAFKA_STORAGE_ERROR`` -> ``KafkaStorageError``.

Invariants: every subclass of ``KafkaError`` that sets ``code`` is registered in
``ERRORS`` exactly once, and ``name`` is always ``ErrorCode(code).name``. This
module is pure data: it holds no state beyond the registry built at import time.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import ClassVar

__all__ = ["ERRORS", "ErrorCode", "KafkaError", "error_for_code"]


class ErrorCode(IntEnum):
    """Every error code Kafka defines, by Kafka's name."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133
    # Samsa's own codes (see the module docstring).
    OFFSET_CONFLICT = 10000


_registry: dict[int, type[KafkaError]] = {}


class KafkaError(Exception):
    """Base of every error that has a Kafka error code.

    Subclasses set ``code`` (and ``retriable``/``default_message`` where Kafka
    does); ``name`` is filled in from ``ErrorCode`` and the class is registered
    for ``error_for_code``. The base class itself stands for UNKNOWN_SERVER_ERROR.
    """

    code: ClassVar[int] = ErrorCode.UNKNOWN_SERVER_ERROR
    name: ClassVar[str] = ErrorCode.UNKNOWN_SERVER_ERROR.name
    retriable: ClassVar[bool] = False
    default_message: ClassVar[str] = ""

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        if "code" not in cls.__dict__:
            return  # an intermediate base class, not bound to a code
        cls.name = ErrorCode(cls.code).name
        if cls.code in _registry:
            raise TypeError(
                f"error code {cls.code} already bound to {_registry[cls.code].__name__}"
            )
        _registry[cls.code] = cls

    def __init__(self, message: str | None = None) -> None:
        self.message = self.default_message if message is None else message
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class UnknownServerError(KafkaError):
    code = ErrorCode.UNKNOWN_SERVER_ERROR
    default_message = "The server experienced an unexpected error when processing the request."


class OffsetOutOfRangeError(KafkaError):
    code = ErrorCode.OFFSET_OUT_OF_RANGE
    default_message = (
        "The requested offset is not within the range of offsets maintained by the server."
    )


class CorruptMessageError(KafkaError):
    code = ErrorCode.CORRUPT_MESSAGE
    retriable = True
    default_message = (
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for a "
        "compacted topic, or is otherwise corrupt."
    )


class UnknownTopicOrPartitionError(KafkaError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    retriable = True
    default_message = "This server does not host this topic-partition."


class InvalidFetchSizeError(KafkaError):
    code = ErrorCode.INVALID_FETCH_SIZE
    default_message = "The requested fetch size is invalid."


class LeaderNotAvailableError(KafkaError):
    code = ErrorCode.LEADER_NOT_AVAILABLE
    retriable = True
    default_message = (
        "There is no leader for this topic-partition as we are in the middle of a leadership "
        "election."
    )


class NotLeaderOrFollowerError(KafkaError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
    retriable = True
    default_message = (
        "For requests intended only for the leader, this error indicates that the broker is not the"
        " current leader. For requests intended for any replica, this error indicates that the "
        "broker is not a replica of the topic partition."
    )


class RequestTimedOutError(KafkaError):
    code = ErrorCode.REQUEST_TIMED_OUT
    retriable = True
    default_message = "The request timed out."


class BrokerNotAvailableError(KafkaError):
    code = ErrorCode.BROKER_NOT_AVAILABLE
    default_message = "The broker is not available."


class ReplicaNotAvailableError(KafkaError):
    code = ErrorCode.REPLICA_NOT_AVAILABLE
    retriable = True
    default_message = (
        "The replica is not available for the requested topic-partition. Produce/Fetch requests and"
        " other requests intended only for the leader or follower return NOT_LEADER_OR_FOLLOWER if "
        "the broker is not a replica of the topic-partition."
    )


class MessageTooLargeError(KafkaError):
    code = ErrorCode.MESSAGE_TOO_LARGE
    default_message = (
        "The request included a message larger than the max message size the server will accept."
    )


class StaleControllerEpochError(KafkaError):
    code = ErrorCode.STALE_CONTROLLER_EPOCH
    default_message = "The controller moved to another broker."


class OffsetMetadataTooLargeError(KafkaError):
    code = ErrorCode.OFFSET_METADATA_TOO_LARGE
    default_message = "The metadata field of the offset request was too large."


class NetworkExceptionError(KafkaError):
    code = ErrorCode.NETWORK_EXCEPTION
    retriable = True
    default_message = "The server disconnected before a response was received."


class CoordinatorLoadInProgressError(KafkaError):
    code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    retriable = True
    default_message = "The coordinator is loading and hence can't process requests."


class CoordinatorNotAvailableError(KafkaError):
    code = ErrorCode.COORDINATOR_NOT_AVAILABLE
    retriable = True
    default_message = "The coordinator is not available."


class NotCoordinatorError(KafkaError):
    code = ErrorCode.NOT_COORDINATOR
    retriable = True
    default_message = "This is not the correct coordinator."


class InvalidTopicExceptionError(KafkaError):
    code = ErrorCode.INVALID_TOPIC_EXCEPTION
    default_message = "The request attempted to perform an operation on an invalid topic."


class RecordListTooLargeError(KafkaError):
    code = ErrorCode.RECORD_LIST_TOO_LARGE
    default_message = (
        "The request included message batch larger than the configured segment size on the server."
    )


class NotEnoughReplicasError(KafkaError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS
    retriable = True
    default_message = "Messages are rejected since there are fewer in-sync replicas than required."


class NotEnoughReplicasAfterAppendError(KafkaError):
    code = ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    retriable = True
    default_message = (
        "Messages are written to the log, but to fewer in-sync replicas than required."
    )


class InvalidRequiredAcksError(KafkaError):
    code = ErrorCode.INVALID_REQUIRED_ACKS
    default_message = "Produce request specified an invalid value for required acks."


class IllegalGenerationError(KafkaError):
    code = ErrorCode.ILLEGAL_GENERATION
    default_message = "Specified group generation id is not valid."


class InconsistentGroupProtocolError(KafkaError):
    code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    default_message = (
        "The group member's supported protocols are incompatible with those of existing members or "
        "first group member tried to join with empty protocol type or empty protocol list."
    )


class InvalidGroupIdError(KafkaError):
    code = ErrorCode.INVALID_GROUP_ID
    default_message = "The configured groupId is invalid."


class UnknownMemberIdError(KafkaError):
    code = ErrorCode.UNKNOWN_MEMBER_ID
    default_message = "The coordinator is not aware of this member."


class InvalidSessionTimeoutError(KafkaError):
    code = ErrorCode.INVALID_SESSION_TIMEOUT
    default_message = (
        "The session timeout is not within the range allowed by the broker (as configured by "
        "group.min.session.timeout.ms and group.max.session.timeout.ms)."
    )


class RebalanceInProgressError(KafkaError):
    code = ErrorCode.REBALANCE_IN_PROGRESS
    default_message = "The group is rebalancing, so a rejoin is needed."


class InvalidCommitOffsetSizeError(KafkaError):
    code = ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    default_message = "The committing offset data size is not valid."


class TopicAuthorizationFailedError(KafkaError):
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    default_message = "Topic authorization failed."


class GroupAuthorizationFailedError(KafkaError):
    code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    default_message = "Group authorization failed."


class ClusterAuthorizationFailedError(KafkaError):
    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    default_message = "Cluster authorization failed."


class InvalidTimestampError(KafkaError):
    code = ErrorCode.INVALID_TIMESTAMP
    default_message = "The timestamp of the message is out of acceptable range."


class UnsupportedSaslMechanismError(KafkaError):
    code = ErrorCode.UNSUPPORTED_SASL_MECHANISM
    default_message = "The broker does not support the requested SASL mechanism."


class IllegalSaslStateError(KafkaError):
    code = ErrorCode.ILLEGAL_SASL_STATE
    default_message = "Request is not valid given the current SASL state."


class UnsupportedVersionError(KafkaError):
    code = ErrorCode.UNSUPPORTED_VERSION
    default_message = "The version of API is not supported."


class TopicAlreadyExistsError(KafkaError):
    code = ErrorCode.TOPIC_ALREADY_EXISTS
    default_message = "Topic with this name already exists."


class InvalidPartitionsError(KafkaError):
    code = ErrorCode.INVALID_PARTITIONS
    default_message = "Number of partitions is below 1."


class InvalidReplicationFactorError(KafkaError):
    code = ErrorCode.INVALID_REPLICATION_FACTOR
    default_message = (
        "Replication factor is below 1 or larger than the number of available brokers."
    )


class InvalidReplicaAssignmentError(KafkaError):
    code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
    default_message = "Replica assignment is invalid."


class InvalidConfigError(KafkaError):
    code = ErrorCode.INVALID_CONFIG
    default_message = "Configuration is invalid."


class NotControllerError(KafkaError):
    code = ErrorCode.NOT_CONTROLLER
    retriable = True
    default_message = "This is not the correct controller for this cluster."


class InvalidRequestError(KafkaError):
    code = ErrorCode.INVALID_REQUEST
    default_message = (
        "This most likely occurs because of a request being malformed by the client library or the "
        "message was sent to an incompatible broker. See the broker logs for more details."
    )


class UnsupportedForMessageFormatError(KafkaError):
    code = ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    default_message = "The message format version on the broker does not support the request."


class PolicyViolationError(KafkaError):
    code = ErrorCode.POLICY_VIOLATION
    default_message = "Request parameters do not satisfy the configured policy."


class OutOfOrderSequenceNumberError(KafkaError):
    code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    default_message = "The broker received an out of order sequence number."


class DuplicateSequenceNumberError(KafkaError):
    code = ErrorCode.DUPLICATE_SEQUENCE_NUMBER
    default_message = "The broker received a duplicate sequence number."


class InvalidProducerEpochError(KafkaError):
    code = ErrorCode.INVALID_PRODUCER_EPOCH
    default_message = "Producer attempted to produce with an old epoch."


class InvalidTxnStateError(KafkaError):
    code = ErrorCode.INVALID_TXN_STATE
    default_message = "The producer attempted a transactional operation in an invalid state."


class InvalidProducerIdMappingError(KafkaError):
    code = ErrorCode.INVALID_PRODUCER_ID_MAPPING
    default_message = (
        "The producer attempted to use a producer id which is not currently assigned to its "
        "transactional id."
    )


class InvalidTransactionTimeoutError(KafkaError):
    code = ErrorCode.INVALID_TRANSACTION_TIMEOUT
    default_message = (
        "The transaction timeout is larger than the maximum value allowed by the broker (as "
        "configured by transaction.max.timeout.ms)."
    )


class ConcurrentTransactionsError(KafkaError):
    code = ErrorCode.CONCURRENT_TRANSACTIONS
    retriable = True
    default_message = (
        "The producer attempted to update a transaction while another concurrent operation on the "
        "same transaction was ongoing."
    )


class TransactionCoordinatorFencedError(KafkaError):
    code = ErrorCode.TRANSACTION_COORDINATOR_FENCED
    default_message = (
        "Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the "
        "current coordinator for a given producer."
    )


class TransactionalIdAuthorizationFailedError(KafkaError):
    code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    default_message = "Transactional Id authorization failed."


class SecurityDisabledError(KafkaError):
    code = ErrorCode.SECURITY_DISABLED
    default_message = "Security features are disabled."


class OperationNotAttemptedError(KafkaError):
    code = ErrorCode.OPERATION_NOT_ATTEMPTED
    default_message = (
        "The broker did not attempt to execute this operation. This may happen for batched RPCs "
        "where some operations in the batch failed, causing the broker to respond without trying "
        "the rest."
    )


class KafkaStorageError(KafkaError):
    code = ErrorCode.KAFKA_STORAGE_ERROR
    retriable = True
    default_message = "Disk error when trying to access log file on the disk."


class LogDirNotFoundError(KafkaError):
    code = ErrorCode.LOG_DIR_NOT_FOUND
    default_message = "The user-specified log directory is not found in the broker config."


class SaslAuthenticationFailedError(KafkaError):
    code = ErrorCode.SASL_AUTHENTICATION_FAILED
    default_message = "SASL Authentication failed."


class UnknownProducerIdError(KafkaError):
    code = ErrorCode.UNKNOWN_PRODUCER_ID
    default_message = (
        "This exception is raised by the broker if it could not locate the producer metadata "
        "associated with the producerId in question. This could happen if, for instance, the "
        "producer's records were deleted because their retention time had elapsed. Once the last "
        "records of the producerId are removed, the producer's metadata is removed from the broker,"
        " and future appends by the producer will return this exception."
    )


class ReassignmentInProgressError(KafkaError):
    code = ErrorCode.REASSIGNMENT_IN_PROGRESS
    default_message = "A partition reassignment is in progress."


class DelegationTokenAuthDisabledError(KafkaError):
    code = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    default_message = "Delegation Token feature is not enabled."


class DelegationTokenNotFoundError(KafkaError):
    code = ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    default_message = "Delegation Token is not found on server."


class DelegationTokenOwnerMismatchError(KafkaError):
    code = ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    default_message = "Specified Principal is not valid Owner/Renewer."


class DelegationTokenRequestNotAllowedError(KafkaError):
    code = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    default_message = (
        "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on "
        "delegation token authenticated channels."
    )


class DelegationTokenAuthorizationFailedError(KafkaError):
    code = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    default_message = "Delegation Token authorization failed."


class DelegationTokenExpiredError(KafkaError):
    code = ErrorCode.DELEGATION_TOKEN_EXPIRED
    default_message = "Delegation Token is expired."


class InvalidPrincipalTypeError(KafkaError):
    code = ErrorCode.INVALID_PRINCIPAL_TYPE
    default_message = "Supplied principalType is not supported."


class NonEmptyGroupError(KafkaError):
    code = ErrorCode.NON_EMPTY_GROUP
    default_message = "The group is not empty."


class GroupIdNotFoundError(KafkaError):
    code = ErrorCode.GROUP_ID_NOT_FOUND
    default_message = "The group id does not exist."


class FetchSessionIdNotFoundError(KafkaError):
    code = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    retriable = True
    default_message = "The fetch session ID was not found."


class InvalidFetchSessionEpochError(KafkaError):
    code = ErrorCode.INVALID_FETCH_SESSION_EPOCH
    retriable = True
    default_message = "The fetch session epoch is invalid."


class ListenerNotFoundError(KafkaError):
    code = ErrorCode.LISTENER_NOT_FOUND
    retriable = True
    default_message = (
        "There is no listener on the leader broker that matches the listener on which metadata "
        "request was processed."
    )


class TopicDeletionDisabledError(KafkaError):
    code = ErrorCode.TOPIC_DELETION_DISABLED
    default_message = "Topic deletion is disabled."


class FencedLeaderEpochError(KafkaError):
    code = ErrorCode.FENCED_LEADER_EPOCH
    retriable = True
    default_message = "The leader epoch in the request is older than the epoch on the broker."


class UnknownLeaderEpochError(KafkaError):
    code = ErrorCode.UNKNOWN_LEADER_EPOCH
    retriable = True
    default_message = "The leader epoch in the request is newer than the epoch on the broker."


class UnsupportedCompressionTypeError(KafkaError):
    code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    default_message = (
        "The requesting client does not support the compression type of given partition."
    )


class StaleBrokerEpochError(KafkaError):
    code = ErrorCode.STALE_BROKER_EPOCH
    default_message = "Broker epoch has changed."


class OffsetNotAvailableError(KafkaError):
    code = ErrorCode.OFFSET_NOT_AVAILABLE
    retriable = True
    default_message = (
        "The leader high watermark has not caught up from a recent leader election so the offsets "
        "cannot be guaranteed to be monotonically increasing."
    )


class MemberIdRequiredError(KafkaError):
    code = ErrorCode.MEMBER_ID_REQUIRED
    default_message = (
        "The group member needs to have a valid member id before actually entering a consumer "
        "group."
    )


class PreferredLeaderNotAvailableError(KafkaError):
    code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    retriable = True
    default_message = "The preferred leader was not available."


class GroupMaxSizeReachedError(KafkaError):
    code = ErrorCode.GROUP_MAX_SIZE_REACHED
    default_message = "The consumer group has reached its max size."


class FencedInstanceIdError(KafkaError):
    code = ErrorCode.FENCED_INSTANCE_ID
    default_message = (
        "The broker rejected this static consumer since another consumer with the same "
        "group.instance.id has registered with a different member.id."
    )


class EligibleLeadersNotAvailableError(KafkaError):
    code = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    retriable = True
    default_message = "Eligible topic partition leaders are not available."


class ElectionNotNeededError(KafkaError):
    code = ErrorCode.ELECTION_NOT_NEEDED
    retriable = True
    default_message = "Leader election not needed for topic partition."


class NoReassignmentInProgressError(KafkaError):
    code = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    default_message = "No partition reassignment is in progress."


class GroupSubscribedToTopicError(KafkaError):
    code = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
    default_message = (
        "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed "
        "to it."
    )


class InvalidRecordError(KafkaError):
    code = ErrorCode.INVALID_RECORD
    default_message = "This record has failed the validation on broker and hence will be rejected."


class UnstableOffsetCommitError(KafkaError):
    code = ErrorCode.UNSTABLE_OFFSET_COMMIT
    retriable = True
    default_message = "There are unstable offsets that need to be cleared."


class ThrottlingQuotaExceededError(KafkaError):
    code = ErrorCode.THROTTLING_QUOTA_EXCEEDED
    retriable = True
    default_message = "The throttling quota has been exceeded."


class ProducerFencedError(KafkaError):
    code = ErrorCode.PRODUCER_FENCED
    default_message = (
        "There is a newer producer with the same transactionalId which fences the current one."
    )


class ResourceNotFoundError(KafkaError):
    code = ErrorCode.RESOURCE_NOT_FOUND
    default_message = "A request illegally referred to a resource that does not exist."


class DuplicateResourceError(KafkaError):
    code = ErrorCode.DUPLICATE_RESOURCE
    default_message = "A request illegally referred to the same resource twice."


class UnacceptableCredentialError(KafkaError):
    code = ErrorCode.UNACCEPTABLE_CREDENTIAL
    default_message = "Requested credential would not meet criteria for acceptability."


class InconsistentVoterSetError(KafkaError):
    code = ErrorCode.INCONSISTENT_VOTER_SET
    default_message = (
        "Indicates that the either the sender or recipient of a voter-only request is not one of "
        "the expected voters."
    )


class InvalidUpdateVersionError(KafkaError):
    code = ErrorCode.INVALID_UPDATE_VERSION
    default_message = "The given update version was invalid."


class FeatureUpdateFailedError(KafkaError):
    code = ErrorCode.FEATURE_UPDATE_FAILED
    default_message = "Unable to update finalized features due to an unexpected server error."


class PrincipalDeserializationFailureError(KafkaError):
    code = ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE
    default_message = (
        "Request principal deserialization failed during forwarding. This indicates an internal "
        "error on the broker cluster security setup."
    )


class SnapshotNotFoundError(KafkaError):
    code = ErrorCode.SNAPSHOT_NOT_FOUND
    default_message = (
        "Requested snapshot was not found.Requested position is not greater than or equal to zero, "
        "and less than the size of the snapshot."
    )


class UnknownTopicIdError(KafkaError):
    code = ErrorCode.UNKNOWN_TOPIC_ID
    retriable = True
    default_message = "This server does not host this topic ID."


class DuplicateBrokerRegistrationError(KafkaError):
    code = ErrorCode.DUPLICATE_BROKER_REGISTRATION
    default_message = "This broker ID is already in use."


class BrokerIdNotRegisteredError(KafkaError):
    code = ErrorCode.BROKER_ID_NOT_REGISTERED
    default_message = "The given broker ID was not registered."


class InconsistentTopicIdError(KafkaError):
    code = ErrorCode.INCONSISTENT_TOPIC_ID
    retriable = True
    default_message = "The log's topic ID did not match the topic ID in the request."


class InconsistentClusterIdError(KafkaError):
    code = ErrorCode.INCONSISTENT_CLUSTER_ID
    default_message = "The clusterId in the request does not match that found on the server."


class TransactionalIdNotFoundError(KafkaError):
    code = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    default_message = "The transactionalId could not be found."


class FetchSessionTopicIdError(KafkaError):
    code = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    retriable = True
    default_message = "The fetch session encountered inconsistent topic ID usage."


class IneligibleReplicaError(KafkaError):
    code = ErrorCode.INELIGIBLE_REPLICA
    default_message = "The new ISR contains at least one ineligible replica."


class NewLeaderElectedError(KafkaError):
    code = ErrorCode.NEW_LEADER_ELECTED
    default_message = (
        "The AlterPartition request successfully updated the partition state but the leader has "
        "changed."
    )


class OffsetMovedToTieredStorageError(KafkaError):
    code = ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE
    default_message = "The requested offset is moved to tiered storage."


class FencedMemberEpochError(KafkaError):
    code = ErrorCode.FENCED_MEMBER_EPOCH
    default_message = (
        "The member epoch is fenced by the group coordinator. The member must abandon all its "
        "partitions and rejoin."
    )


class UnreleasedInstanceIdError(KafkaError):
    code = ErrorCode.UNRELEASED_INSTANCE_ID
    default_message = (
        "The instance ID is still used by another member in the consumer group. That member must "
        "leave first."
    )


class UnsupportedAssignorError(KafkaError):
    code = ErrorCode.UNSUPPORTED_ASSIGNOR
    default_message = "The assignor or its version range is not supported by the consumer group."


class StaleMemberEpochError(KafkaError):
    code = ErrorCode.STALE_MEMBER_EPOCH
    default_message = (
        "The member epoch is stale. The member must retry after receiving its updated member epoch "
        "via the ConsumerGroupHeartbeat API."
    )


class MismatchedEndpointTypeError(KafkaError):
    code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
    default_message = "The request was sent to an endpoint of the wrong type."


class UnsupportedEndpointTypeError(KafkaError):
    code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
    default_message = "This endpoint type is not supported yet."


class UnknownControllerIdError(KafkaError):
    code = ErrorCode.UNKNOWN_CONTROLLER_ID
    default_message = "This controller ID is not known."


class UnknownSubscriptionIdError(KafkaError):
    code = ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    default_message = (
        "Client sent a push telemetry request with an invalid or outdated subscription ID."
    )


class TelemetryTooLargeError(KafkaError):
    code = ErrorCode.TELEMETRY_TOO_LARGE
    default_message = (
        "Client sent a push telemetry request larger than the maximum size the broker will accept."
    )


class InvalidRegistrationError(KafkaError):
    code = ErrorCode.INVALID_REGISTRATION
    default_message = "The controller has considered the broker registration to be invalid."


class TransactionAbortableError(KafkaError):
    code = ErrorCode.TRANSACTION_ABORTABLE
    default_message = (
        "The server encountered an error with the transaction. The client can abort the transaction"
        " to continue using this transactional ID."
    )


class InvalidRecordStateError(KafkaError):
    code = ErrorCode.INVALID_RECORD_STATE
    default_message = (
        "The record state is invalid. The acknowledgement of delivery could not be completed."
    )


class ShareSessionNotFoundError(KafkaError):
    code = ErrorCode.SHARE_SESSION_NOT_FOUND
    retriable = True
    default_message = "The share session was not found."


class InvalidShareSessionEpochError(KafkaError):
    code = ErrorCode.INVALID_SHARE_SESSION_EPOCH
    retriable = True
    default_message = "The share session epoch is invalid."


class FencedStateEpochError(KafkaError):
    code = ErrorCode.FENCED_STATE_EPOCH
    default_message = (
        "The share coordinator rejected the request because the share-group state epoch did not "
        "match."
    )


class ShareSessionLimitReachedError(KafkaError):
    code = ErrorCode.SHARE_SESSION_LIMIT_REACHED
    retriable = True
    default_message = "The limit of share sessions has been reached."


class InvalidVoterKeyError(KafkaError):
    code = ErrorCode.INVALID_VOTER_KEY
    default_message = "The voter key doesn't match the receiving replica's key."


class DuplicateVoterError(KafkaError):
    code = ErrorCode.DUPLICATE_VOTER
    default_message = "The voter is already part of the set of voters."


class VoterNotFoundError(KafkaError):
    code = ErrorCode.VOTER_NOT_FOUND
    default_message = "The voter is not part of the set of voters."


class InvalidRegularExpressionError(KafkaError):
    code = ErrorCode.INVALID_REGULAR_EXPRESSION
    default_message = "The regular expression is not valid."


class RebootstrapRequiredError(KafkaError):
    code = ErrorCode.REBOOTSTRAP_REQUIRED
    default_message = ("Client metadata is stale. The client should rebootstrap to obtain new "
                       "metadata.")


class StreamsInvalidTopologyError(KafkaError):
    code = ErrorCode.STREAMS_INVALID_TOPOLOGY
    default_message = "The supplied topology is invalid."


class StreamsInvalidTopologyEpochError(KafkaError):
    code = ErrorCode.STREAMS_INVALID_TOPOLOGY_EPOCH
    default_message = "The supplied topology epoch is invalid."


class StreamsTopologyFencedError(KafkaError):
    code = ErrorCode.STREAMS_TOPOLOGY_FENCED
    default_message = "The supplied topology epoch is outdated."


class OffsetConflictError(KafkaError):
    """A conditional append's condition did not hold; ``current_offset`` is the partition's
    actual log end offset, or the actual offset of the last record with the key (-1: none)."""

    code = ErrorCode.OFFSET_CONFLICT
    default_message = "The expected offset of a conditional append is not the current one."

    def __init__(self, message: str | None = None, *, current_offset: int = -1) -> None:
        super().__init__(message)
        self.current_offset = current_offset


ERRORS: Mapping[int, type[KafkaError]] = MappingProxyType(_registry)
"""Every nonzero error code -> its exception class."""


def error_for_code(code: int) -> type[KafkaError]:
    """The exception class for ``code``.

    An unknown code maps to ``UnknownServerError``, as Kafka's ``Errors.forCode``
    does, so a newer peer's code never crashes the reader. Code 0 (NONE) is not
    an error and raises ``ValueError``.
    """
    if code == ErrorCode.NONE:
        raise ValueError("error code 0 (NONE) is not an error")
    return _registry.get(code, UnknownServerError)

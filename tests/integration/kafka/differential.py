"""Differential testing: the same request to Apache Kafka and to Samsa, the answers compared.

A ``Wire`` is one blocking connection speaking the protocol package's framing (requests
encoded by the generated codec at a chosen version, responses decoded at that version). A
``Pair`` holds one wire to each broker; ``Pair.both(request, version)`` sends the request to
both and returns the two decoded answers (or ``CLOSED`` where a broker closed the connection
instead of answering, as Kafka does for a request it cannot parse).

Comparison (``differences``): a response becomes a tree of plain values (``plain``): a
dataclass becomes a dict of its fields, a list of elements that carry a key field
(``name``, ``partition_index``, ``api_key``, ...) becomes a dict by that key so that order
does not matter and paths read ``topics[orders].partitions[0].error_code``. Two trees are
walked together; every leaf that differs, and every key present on one side only, is a
``Difference(path, kafka, samsa)``.

Record batches (a ``records`` field) are decoded: a dict by base offset (``5:control`` for a
control batch) of the header fields (not the CRC) and the records by offset.

``ALLOWLIST`` is the one table of intended differences: each entry names the API, a path
pattern (``*`` matches any run of characters, ``.`` and ``[]`` included) and why. An entry
either accepts differing values (by nature: ports, topic ids, error texts...) or, with
``kafka_only`` / ``samsa_only``, a key present on one side only (an API or a config one broker
has and the other lacks). ``SITUATIONAL`` entries hold for one request only and are named by
the test that sends it (``allow=``). A test fails on any difference no entry covers, and the
module's last test fails on an entry no difference needed (stale: Samsa or Kafka changed),
but for those marked ``sometimes`` (a difference of timing).
Kafka's broker configs Samsa lacks are listed in ``broker_configs_only_in_kafka.txt``.
"""

from __future__ import annotations

import re
import socket
import struct
import time
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from protocol.frames import encode_request
from protocol.messages import RESPONSES, response_header_version
from protocol.messages.request_header import RequestHeader
from protocol.messages.response_header import ResponseHeader
from protocol.records import iter_batches

__all__ = ["ALLOWLIST", "CLOSED", "Allowed", "Difference", "Pair", "Wire", "differences",
           "plain", "unexplained"]

ANY = "*"
MISSING = "<missing>"
# Fields whose value names an element of a list: the list is compared as a dict by it.
KEY_FIELDS = ("api_key", "name", "topic", "topic_name", "partition_index", "partition",
              "index", "resource_name", "group_id", "key",
              "transactional_id", "producer_id", "broker_id", "node_id", "feature")


class Closed:
    """The broker closed the connection instead of answering."""

    def __repr__(self) -> str:
        return "CLOSED"


CLOSED = Closed()


@dataclass(frozen=True)
class Allowed:
    """An intended difference: ``api`` (API key or ``ANY``), a path pattern, and why.

    ``kafka_only`` / ``samsa_only``: a key present on that side only is accepted (the values
    of a key both sides have are still compared); otherwise differing values are accepted."""

    api: int | str
    path: str
    why: str
    kafka_only: bool = False
    samsa_only: bool = False
    sometimes: bool = False  # a difference of timing that a run may not meet
    within: int | None = None  # only numbers at most this far apart (else any difference)

    def covers(self, api_key: int, difference: Difference) -> bool:
        if self.api not in (ANY, api_key) or not _matches(self.path, difference.path):
            return False
        if self.within is not None:
            return (isinstance(difference.kafka, int) and isinstance(difference.samsa, int)
                    and abs(difference.kafka - difference.samsa) <= self.within)
        if self.kafka_only or self.samsa_only:
            return ((self.kafka_only and difference.samsa == MISSING)
                    or (self.samsa_only and difference.kafka == MISSING))
        return True


def _matches(pattern: str, path: str) -> bool:
    """``*`` matches any run of characters (``.`` and brackets included); nothing else is
    special (unlike ``fnmatch``, whose ``[...]`` would be a character class)."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), path) is not None


@dataclass(frozen=True)
class Difference:
    path: str
    kafka: Any
    samsa: Any

    def __str__(self) -> str:
        return f"{self.path}: kafka={self.kafka!r} samsa={self.samsa!r}"


# API keys used below (Kafka's numbering).
PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 10, 11, 12, 13, 14
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PRODUCER_ID = 18, 19, 20, 21, 22
ADD_PARTITIONS_TO_TXN, END_TXN, DESCRIBE_CONFIGS, ALTER_CONFIGS = 24, 26, 32, 33
DESCRIBE_LOG_DIRS, INCREMENTAL_ALTER_CONFIGS, DESCRIBE_CLUSTER = 35, 44, 60

# The APIs Kafka 4.3.1 advertises and Samsa does not, by why.
MISSING_APIS: list[tuple[tuple[int, ...], str]] = [
    ((38, 39, 40, 41), "delegation tokens (Create/Renew/Expire/DescribeDelegationToken): "
     "Samsa has no token authentication"),
    ((48, 49), "client quotas (Describe/AlterClientQuotas): Samsa enforces no quotas"),
    ((57,), "UpdateFeatures: Samsa has no feature levels to finalize (see FEATURES)"),
    ((64,), "UnregisterBroker: not implemented"),
    ((68, 69), "ConsumerGroupHeartbeat/Describe (KIP-848, group.protocol=consumer): not "
     "implemented; the classic protocol is"),
    ((74,), "ListClientMetricsResources (KIP-714): no client metrics"),
    ((80, 81), "Add/RemoveRaftVoter (KIP-853 dynamic quorums): Samsa's voters are static"),
    ((88, 89), "streams groups (KIP-1071: StreamsGroupHeartbeat/Describe): not implemented"),
]
# Kafka 4.3.1 serves newer versions of these than Samsa's codec knows.
OLDER_MAX = (0, 1, 2, 3, 8, 9, 15, 27, 28, 35, 45, 66)
NEWER_SCHEMAS = ("Samsa's codec is generated from Kafka's schemas of 2024-10-23 (trunk before "
                 "4.0, protocol/schemas/SOURCE.md); later versions (Produce v12-13, Fetch v18, "
                 "Metadata v13, OffsetCommit/OffsetFetch v10, ...) are not generated yet")
FEATURES = ("Kafka finalizes feature levels at format (metadata.version, transaction.version=2 "
            "i.e. KIP-890 part 2, group.version, ...); Samsa advertises none, so clients use "
            "the pre-feature protocol (transactions v1, classic groups)")

ALLOWLIST: list[Allowed] = [
    # --- what differs by nature between two brokers ---------------------------------------
    Allowed(ANY, "*error_message", "free-form text; the error codes are compared"),
    Allowed(ANY, "*cluster_id", "each broker formats its own cluster id"),
    Allowed(ANY, "*topic_id", "topic ids are random per broker"),
    Allowed(ANY, "*port", "ephemeral ports"),
    Allowed(ANY, "*log_dir", "each broker's own log directory"),
    Allowed(ANY, "*member_id", "member ids are generated (client id + a random UUID)"),
    # Not needed, as both test brokers are node 1 on 127.0.0.1 and allocate producer ids from
    # 0: node ids, hosts, leaders, replicas, producer ids; throttle times are 0 on both.
    Allowed(ANY, "*records[*:control].*timestamp", "a transaction marker is stamped with the "
            "wall clock of the broker that writes it (the same when both write it within the "
            "same millisecond)", sometimes=True),
    Allowed(DESCRIBE_LOG_DIRS, "results[*].usable_bytes", "the free space of the filesystem "
            "both brokers' directories share, read at two moments: tests on other workers "
            "write meanwhile (the same number when nothing did; a wrong reckoning, such as "
            "free blocks for available ones, is gigabytes off)", sometimes=True,
            within=1 << 30),
    # --- configuration ----------------------------------------------------------------------
    Allowed(ANY, "*configs[min.insync.replicas].synonyms", "see the next entry: Kafka lists "
            "the cluster-wide value as a synonym too"),
    Allowed(ANY, "*configs[min.insync.replicas].config_source", "Kafka 4's kafka-storage "
            "format writes a cluster-wide dynamic min.insync.replicas=1 (the ELR feature needs "
            "one), so Kafka reports DYNAMIC_DEFAULT_BROKER_CONFIG (3) where Samsa reports "
            "DEFAULT_CONFIG (5); the value is the same"),
    # --- ApiVersions --------------------------------------------------------------------------
    *[Allowed(API_VERSIONS, f"api_keys[{key}]", why, kafka_only=True)
      for keys, why in MISSING_APIS for key in keys],
    *[Allowed(API_VERSIONS, f"api_keys[{key}].max_version", NEWER_SCHEMAS) for key in OLDER_MAX],
    *[Allowed(API_VERSIONS, f"api_keys[{key}].max_version", "ShareFetch/ShareAcknowledge v2 "
              "(KIP-1206 ShareAcquireMode, KIP-1222 RENEW) are generated but not served: "
              "Samsa serves v1") for key in (78, 79)],
    Allowed(API_VERSIONS, "api_keys[10000]", "Samsa's own DescribeLogSegments (samsa log "
            "segments), in the range Kafka leaves to private APIs", samsa_only=True),
    Allowed(API_VERSIONS, "api_keys[10001]", "Samsa's own SamsaConditionalProduce (conditional "
            "appends), in the range Kafka leaves to private APIs", samsa_only=True),
    Allowed(API_VERSIONS, "api_keys[10002]", "Samsa's own SamsaReadKey (per-key streams), in the "
            "range Kafka leaves to private APIs", samsa_only=True),
    Allowed(API_VERSIONS, "api_keys[10003]", "Samsa's own SamsaDescribeSharePartitions (a share "
            "partition's in-flight records), in the range Kafka leaves to private APIs",
            samsa_only=True),
    Allowed(API_VERSIONS, "supported_features*", FEATURES),
    Allowed(API_VERSIONS, "finalized_features*", FEATURES),
]


# Broker configs (DescribeConfigs of broker "1"; both test brokers are node 1).
# Kafka's broker configs Samsa does not have (SASL OAUTHBEARER/Kerberos, remote log storage,
# share and streams groups, KIP-848 groups, quotas, metrics reporters, socket and thread
# tuning, ...): listed in this file, one a line, which the test holds Kafka's answer to.
BROKER_CONFIGS_ONLY_IN_KAFKA = frozenset(
    (Path(__file__).parent / "broker_configs_only_in_kafka.txt").read_text().split())
_SET_BY_THE_KAFKA_NODE = (  # compat/apache_kafka.py ApacheKafka.properties(): KRaft, RF 1
    "listeners", "advertised.listeners", "controller.listener.names", "controller.quorum.voters",
    "inter.broker.listener.name", "listener.security.protocol.map", "log.dirs", "node.id",
    "process.roles", "offsets.topic.replication.factor", "transaction.state.log.min.isr",
    "transaction.state.log.replication.factor", "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr")
_SET_ON_BOTH = {("listeners", "config_source"), ("log.dirs", "config_source"),
                ("node.id", "value")}  # the same value, or both set (STATIC_BROKER_CONFIG)
_DYNAMIC_IN_KAFKA_ONLY = (  # Kafka can change these per broker at run time; Samsa cannot
    "listeners", "listener.security.protocol.map", "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size", "num.recovery.threads.per.data.dir",
    "num.replica.fetchers", "sasl.enabled.mechanisms",
    "transaction.partition.verification.enable")
_SAMSA_ONLY_BROKER_CONFIGS = {
    "allow.everyone.if.no.acl.found": "StandardAuthorizer's; Kafka's authorizer configs are "
    "not broker configs it describes",
    "super.users": "StandardAuthorizer's (as allow.everyone.if.no.acl.found)",
    "leader.imbalance.per.broker.percentage": "removed from Kafka 4.0; Samsa still reads it",
    "unclean.leader.election.interval.ms": "an internal config in Kafka, not described",
    "metadata.log.segment.min.bytes": "an internal config in Kafka, not described",
    "log.segment.open.files.max": "Samsa's own: its bound on open segment files",
    "metrics.port": "Samsa's own: the Prometheus endpoint",
    "samsa.log.verify.on.startup": "Samsa's own: CRC checks of the logs at start-up",
    "samsa.log.background.load.above": "Samsa's own: logs loaded after the listeners open",
}
BROKER_CONFIG_DIFFERENCES: list[Allowed] = [
    Allowed(DESCRIBE_CONFIGS, "results[1].configs[*]", "see BROKER_CONFIGS_ONLY_IN_KAFKA",
            kafka_only=True),
    *[Allowed(DESCRIBE_CONFIGS, f"results[1].configs[{key}]", why, samsa_only=True)
      for key, why in _SAMSA_ONLY_BROKER_CONFIGS.items()],
    *[Allowed(DESCRIBE_CONFIGS, f"results[1].configs[{key}].{field}", "set by the test's Kafka "
              "node (KRaft combined mode, replication factor 1); Samsa runs on its defaults "
              "(but for its listener and log dir)")
      for key in _SET_BY_THE_KAFKA_NODE for field in ("value", "config_source")
      if (key, field) not in _SET_ON_BOTH],
    *[Allowed(DESCRIBE_CONFIGS, f"results[1].configs[{key}].read_only", "Kafka updates it "
              "per broker at run time (DynamicBrokerConfig); Samsa only at start")
      for key in _DYNAMIC_IN_KAFKA_ONLY],
    Allowed(DESCRIBE_CONFIGS, "results[1].configs[log.dir].value", "the default log directory "
            "is named after the broker: /tmp/kafka-logs, /tmp/samsa-logs"),
    Allowed(DESCRIBE_CONFIGS, "results[1].configs[replica.selector.class].value", "no selector: "
            "Kafka's default is null, Samsa's the empty string"),
]


class Keyed(dict[str, Any]):
    """A list of elements as a dict by their key field (paths read ``[key]``)."""


# Differences of one situation, allowed only where a test names them (``allow=``): the path
# alone would hide real differences elsewhere.
# Kafka 4 (KRaft) answers a Metadata request that auto-creates a topic UNKNOWN_TOPIC_OR_PARTITION
# while it forwards the creation to the controller (AutoTopicCreationManager); Samsa answers
# LEADER_NOT_AVAILABLE (with the new topic's id) until the topic's logs exist. Both are
# retriable; Samsa's own client and CLI read UNKNOWN_TOPIC_OR_PARTITION as "auto-creation is
# off", so Samsa keeps Kafka 3's answer.
AUTO_CREATING = Allowed(METADATA, "topics[*].error_code", "auto-creation in progress: 3 vs 5")
# Kafka answers a retried (duplicate) batch with log_append_time_ms = the batch's max timestamp
# even on a CreateTime topic (UnifiedLog: ``setLogAppendTime(duplicate.timestamp)``), against
# the field's definition (-1 for CreateTime); Samsa answers -1 there, as for the original
# append (storage/log_append.py ``duplicate_result``).
DUPLICATE_APPEND_TIME = Allowed(PRODUCE, "*log_append_time_ms", "a duplicate's append time")
# JoinGroup's leader is a member id, and member ids are generated (see ``*member_id``).
JOIN_LEADER = Allowed(JOIN_GROUP, "leader", "the leader is a member id (generated)")
# An unknown IncrementalAlterConfigs operation: Kafka's OpType.forId throws and the unhandled
# exception becomes UNKNOWN_SERVER_ERROR; Samsa refuses it as INVALID_REQUEST.
UNKNOWN_OPERATION = Allowed(INCREMENTAL_ALTER_CONFIGS, "responses[*].error_code",
                            "an unknown config operation: Kafka -1 (a crash), Samsa 42")
SITUATIONAL = [AUTO_CREATING, DUPLICATE_APPEND_TIME, JOIN_LEADER, UNKNOWN_OPERATION,
               *BROKER_CONFIG_DIFFERENCES]


def plain(value: Any) -> Any:
    """A decoded message as plain, comparable values (see the module docstring)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain_records(item) if f.name == "records" else plain(item)
                for f in fields(value) if f.name != "unknown_tagged_fields"
                for item in [getattr(value, f.name)]}
    if isinstance(value, list):
        items = [plain(element) for element in value]
        key = _list_key(value)
        if key is None:
            return items
        return Keyed((str(item[key]), item) for item in items)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, memoryview):
        return bytes(value)
    return value


def _plain_records(records: Any) -> Any:
    """Record batches as a dict by base offset (``:control`` appended for a control batch),
    each its header fields (the CRC left out: the contents are compared) and its records by
    offset; a batch cut short at the end (a fetch's size limit) as ``partial_tail``, its size."""
    if not isinstance(records, (bytes, bytearray, memoryview)):
        return plain(records)
    view = memoryview(records)
    batches = Keyed()
    consumed = 0
    for batch in iter_batches(view, allow_partial_tail=True):
        header = batch.header
        consumed += header.size_in_bytes
        key = f"{header.base_offset}:control" if header.is_control else str(header.base_offset)
        batches[key] = {
            **{name: getattr(header, name) for name in BATCH_FIELDS},
            "records": Keyed((str(record.offset), {
                "timestamp": record.timestamp, "key": record.key, "value": record.value,
                "headers": list(record.headers)}) for record in batch.records)}
    if consumed < view.nbytes:
        batches["partial_tail"] = view.nbytes - consumed
    return batches


BATCH_FIELDS = ("batch_length", "partition_leader_epoch", "magic", "attributes",
                "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
                "producer_epoch", "base_sequence", "records_count")


def _list_key(value: list[Any]) -> str | None:
    """The key field naming each element of ``value``, if every element has a distinct one."""
    if not value or not is_dataclass(value[0]):
        return None
    names = {f.name for f in fields(value[0])}
    for key in KEY_FIELDS:
        if key in names and len({getattr(element, key) for element in value}) == len(value):
            return key
    return None


def differences(kafka: Any, samsa: Any, path: str = "") -> list[Difference]:
    """Every leaf that differs between two ``plain`` trees, with its path."""
    if isinstance(kafka, dict) and isinstance(samsa, dict):
        found: list[Difference] = []
        for key in list(kafka) + [key for key in samsa if key not in kafka]:
            keyed = isinstance(kafka, Keyed) or isinstance(samsa, Keyed)
            inner = f"{path}[{key}]" if keyed else f"{path}.{key}".lstrip(".")
            found += differences(kafka.get(key, MISSING), samsa.get(key, MISSING), inner)
        return found
    if isinstance(kafka, list) and isinstance(samsa, list) and len(kafka) == len(samsa):
        return [d for index, (k, s) in enumerate(zip(kafka, samsa, strict=True))
                for d in differences(k, s, f"{path}[{index}]")]
    return [] if kafka == samsa else [Difference(path, kafka, samsa)]


def unexplained(api_key: int, found: list[Difference],
                allowlist: list[Allowed] | None = None) -> list[Difference]:
    """The differences no allowlist entry covers; marks the entries that cover one as used."""
    entries = ALLOWLIST if allowlist is None else allowlist
    left = []
    for difference in found:
        covering = [entry for entry in entries if entry.covers(api_key, difference)]
        USED.update(covering)
        if not covering:
            left.append(difference)
    return left


USED: set[Allowed] = set()


def describe(request: Any, limit: int = 600) -> str:
    """A request's repr, record bytes left out, cut at ``limit`` characters."""
    text = re.sub(r"records=(b'[^']*'|b\"[^\"]*\"|<memory at [^>]*>)", "records=...", repr(request))
    return text[:limit]


class Wire:
    """One blocking connection; ``call`` returns the decoded answer or ``CLOSED``."""

    def __init__(self, address: tuple[str, int], client_id: str = "differential") -> None:
        self.address = address
        self.client_id = client_id
        self.sock: socket.socket | None = None
        self.correlation_id = 0

    def call(self, request: Any, version: int, *, api_key: int | None = None,
             expect_response: bool = True, decode_at: int | None = None) -> Any:
        """``request`` at ``version``; its answer decoded at ``decode_at`` (else ``version``)."""
        api_key = request.API_KEY if api_key is None else api_key
        self.correlation_id += 1
        header = RequestHeader(request_api_key=api_key, request_api_version=version,
                               correlation_id=self.correlation_id, client_id=self.client_id)
        frame = encode_request(header, request)
        return self.call_raw(frame, api_key, version if decode_at is None else decode_at,
                             expect_response=expect_response)

    def frame(self, request: Any, version: int, *, claimed_version: int) -> bytes:
        """``request`` encoded at ``version`` in a frame whose header claims another."""
        self.correlation_id += 1
        header = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                               correlation_id=self.correlation_id, client_id=self.client_id)
        frame = bytearray(encode_request(header, request))
        struct.pack_into(">h", frame, 6, claimed_version)  # after the size and the API key
        return bytes(frame)

    def raw(self, api_key: int, version: int, body: bytes) -> bytes:
        """A frame with a v1 header (no tagged fields) and ``body`` as it is."""
        self.correlation_id += 1
        client_id = self.client_id.encode()
        header = struct.pack(">hhih", api_key, version, self.correlation_id, len(client_id))
        payload = header + client_id + body
        return struct.pack(">i", len(payload)) + payload

    def call_raw(self, frame: bytes, api_key: int, version: int, *,
                 expect_response: bool = True) -> Any:
        """Send a whole frame (size included); the answer decoded at ``version`` of
        ``api_key``, or ``CLOSED``."""
        sock = self._connect()
        try:
            sock.sendall(frame)
            if not expect_response:
                return None
            body = self._read(struct.unpack(">i", self._read(4))[0])
        except OSError:  # ConnectionError included; a timeout too: no answer is no answer
            self.close()
            return CLOSED
        header, offset = ResponseHeader.decode_from(
            memoryview(body), 0, response_header_version(api_key, version))
        assert header.correlation_id == self.correlation_id, "out of step"
        return RESPONSES[api_key].decode(memoryview(body)[offset:], version)

    def _connect(self) -> socket.socket:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=30)
        return self.sock

    def _read(self, count: int) -> bytes:
        assert self.sock is not None
        data = bytearray()
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


@dataclass
class Pair:
    """One wire to Apache Kafka and one to Samsa; every call goes to both."""

    kafka: Wire
    samsa: Wire
    log: list[str] = field(default_factory=list)

    def both(self, request: Any, version: int, **options: Any) -> tuple[Any, Any]:
        return (self.kafka.call(request, version, **options),
                self.samsa.call(request, version, **options))

    def compare(self, request: Any, version: int, *, allow: list[Allowed] | None = None,
                api_key: int | None = None) -> tuple[Any, Any]:
        """Send to both; fail on any difference no allowlist entry (or ``allow``) covers."""
        api_key = request.API_KEY if api_key is None else api_key
        kafka, samsa = self.both(request, version, api_key=api_key)
        self.assert_same(api_key, version, kafka, samsa, allow=allow, request=request)
        return kafka, samsa

    def compare_settled(self, request: Any, version: int, *, timeout_s: float = 15) -> None:
        """``compare`` for a read that follows a write: Kafka's broker applies a committed
        metadata record (a config change) when its metadata publisher gets to it, so its
        DescribeConfigs may still show the old value for a moment; ask again until both agree
        (or the deadline, then fail with the differences)."""
        deadline = time.monotonic() + timeout_s
        while True:
            kafka, samsa = self.both(request, version, api_key=request.API_KEY)
            found = differences(plain(kafka), plain(samsa))
            if not unexplained(request.API_KEY, found, ALLOWLIST) or time.monotonic() > deadline:
                self.assert_same(request.API_KEY, version, kafka, samsa, request=request)
                return
            time.sleep(0.05)

    def assert_same(self, api_key: int, version: int, kafka: Any, samsa: Any, *,
                    allow: list[Allowed] | None = None, request: Any = None) -> None:
        found = differences(plain(kafka), plain(samsa))
        left = unexplained(api_key, found, ALLOWLIST + (allow or []))
        name = RESPONSES[api_key].__name__
        assert not left, f"{name} v{version}: {len(left)} unexplained difference(s):\n" + \
            "\n".join(f"  {d}" for d in left) + f"\nrequest: {describe(request)}"

    def close(self) -> None:
        self.kafka.close()
        self.samsa.close()

"""The one reviewed table of test outcomes ``make compat`` tolerates that are not a pass.

Every other outcome fails the run: a failed or errored test, a crash, a missing result file, a
timeout, a used-up time budget, a broker that died, and a test that skips itself without an
entry here (an unexpected skip is a regression too).

Each entry names one test of a suite (kafka-python's ``module_or_class::test`` as its JUnit file
reports it, or librdkafka's test name from ``tests/test.c``) and a reason whose condition the
harness re-checks on every run against ``Facts`` gathered from the broker it has just started
(its ApiVersions, the listeners and SASL mechanisms its configuration accepts) and from the run
itself (quick or full mode, brokers per pass, whether Kafka's Java tools are installed, whether
a cluster's followers hold the records produced to their leader). While the
condition holds the harness does not run the test and records it as skipped with the reason;
once it stops holding (``NeedsApi(45)`` once ApiVersions advertises 45) the entry no longer
applies and the test runs like any other: a failure then fails the run, and so does a skip.

Invariant: a reason is a fact that can be checked, never a text match on a failure message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

# Kafka's API names for the keys the entries below name.
API_NAMES = {45: "AlterPartitionReassignments", 46: "ListPartitionReassignments",
             68: "ConsumerGroupHeartbeat"}
KAFKA_PYTHON = "kafka-python"
LIBRDKAFKA = "librdkafka"


@dataclass(frozen=True)
class Facts:
    """What the reasons are checked against; gathered afresh by each suite run."""

    api_versions: Mapping[int, tuple[int, int]]  # {api_key: (min, max)} from ApiVersions
    kafka_version: tuple[int, ...]  # what kafka-python infers from those ApiVersions
    security_protocols: frozenset[str]  # listener protocols the broker's config accepts
    sasl_mechanisms: frozenset[str]  # SASL mechanisms the broker's config accepts
    message_format_v1: bool = False  # the broker serves a Produce v2 request
    quick_mode: bool = False  # librdkafka's test-runner -Q
    brokers: int = 1  # brokers the harness runs each pass against
    # A record produced with acks=all reached a follower's log (compat.samsa_cluster probes it;
    # False on one broker, which has no followers).
    replicates_data: bool = False
    java_tools: bool = False  # a JVM and Kafka's jars (KAFKA_PATH/libs) are installed


class Reason(Protocol):
    def applies(self, facts: Facts) -> bool:
        """True while the test cannot run for this reason."""
        ...

    def describe(self) -> str: ...


@dataclass(frozen=True)
class NeedsApi:
    """The test calls APIs the broker does not advertise in ApiVersions."""

    api_keys: tuple[int, ...]

    def __init__(self, *api_keys: int) -> None:
        object.__setattr__(self, "api_keys", api_keys)

    def applies(self, facts: Facts) -> bool:
        return any(key not in facts.api_versions for key in self.api_keys)

    def describe(self) -> str:
        names = ", ".join(f"{API_NAMES.get(key, 'API')} (key {key})" for key in self.api_keys)
        return f"needs {names}, not advertised in ApiVersions"


@dataclass(frozen=True)
class RemovedInKafka:
    """Message formats v0 and v1, which Kafka 4.0 removed (KIP-896) and the broker refuses too:
    it answers a Produce v2 request UNSUPPORTED_VERSION (``Facts.message_format_v1``)."""

    feature: str
    kafka_version: str

    def applies(self, facts: Facts) -> bool:
        return not facts.message_format_v1

    def describe(self) -> str:
        return (f"{self.feature}: removed in Kafka {self.kafka_version}; the broker answers "
                "Produce v2 UNSUPPORTED_VERSION")


@dataclass(frozen=True)
class NeedsSecurity:
    """A listener security protocol (``kind`` "listener") or a SASL mechanism (``kind``
    "SASL mechanism") that the broker's configuration refuses."""

    kind: str
    name: str

    def applies(self, facts: Facts) -> bool:
        accepted = facts.security_protocols if self.kind == "listener" else facts.sasl_mechanisms
        return self.name not in accepted

    def describe(self) -> str:
        return f"needs {self.kind} {self.name}, which the broker's config refuses"


@dataclass(frozen=True)
class NeedsBrokers:
    """A cluster of more brokers than the harness runs a pass against."""

    count: int
    detail: str

    def applies(self, facts: Facts) -> bool:
        return facts.brokers < self.count

    def describe(self) -> str:
        return f"needs {self.count} brokers ({self.detail}); the harness runs fewer per pass"


@dataclass(frozen=True)
class AssumesOneBroker:
    """The test is right only against a single broker (its suite's own fixture always starts
    one); with more it fails whatever the broker does, Apache Kafka's included."""

    detail: str

    def applies(self, facts: Facts) -> bool:
        return facts.brokers > 1

    def describe(self) -> str:
        return f"assumes a single broker ({self.detail}); this pass runs a cluster"


@dataclass(frozen=True)
class NeedsReplicatedData:
    """Partition data on the followers: records copied from the leader (Kafka's replica
    fetchers), which Samsa's cluster does not do yet (``Facts.replicates_data``)."""

    detail: str

    def applies(self, facts: Facts) -> bool:
        return not facts.replicates_data

    def describe(self) -> str:
        return (f"needs partition data replicated to the followers ({self.detail}); a record "
                "produced with acks=all reached no follower's log (DescribeLogDirs)")


@dataclass(frozen=True)
class NeedsJavaTools:
    """A Java program of Kafka's or of the test's own, built against Kafka's jars."""

    detail: str

    def applies(self, facts: Facts) -> bool:
        return not facts.java_tools

    def describe(self) -> str:
        return f"runs Java ({self.detail}); no JVM and Kafka jars are installed"


@dataclass(frozen=True)
class QuickMode:
    """The test skips itself in librdkafka's quick mode (``-Q``)."""

    def applies(self, facts: Facts) -> bool:
        return facts.quick_mode

    def describe(self) -> str:
        return "skips itself in quick mode (-Q); runs in make compat-full"


@dataclass(frozen=True)
class NeedsKafkaVersion:
    """The test needs a newer Kafka than kafka-python infers from the broker's ApiVersions."""

    version: tuple[int, ...]
    detail: str

    def applies(self, facts: Facts) -> bool:
        return facts.kafka_version < self.version

    def describe(self) -> str:
        return (f"needs Kafka {_dotted(self.version)} ({self.detail}); the broker's ApiVersions "
                "match an older Kafka")


@dataclass(frozen=True)
class OlderKafkaOnly:
    """The test is for brokers older than ``version`` only."""

    version: tuple[int, ...]
    detail: str

    def applies(self, facts: Facts) -> bool:
        return facts.kafka_version >= self.version

    def describe(self) -> str:
        return f"only for brokers older than Kafka {_dotted(self.version)} ({self.detail})"


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


@dataclass(frozen=True)
class Skip:
    suite: str  # KAFKA_PYTHON | LIBRDKAFKA
    test: str
    reason: Reason = field(compare=False)


TOLERATED_SKIPS: tuple[Skip, ...] = (
    Skip(KAFKA_PYTHON, "test_admin_integration::test_list_config_resources",
         NeedsKafkaVersion((4, 1), "ListConfigResources v1; it skips itself below 4.1")),
    Skip(KAFKA_PYTHON, "test_consumer_integration::test_kafka_consumer_offsets_for_time_old",
         OlderKafkaOnly((0, 10, 1), "expects ListOffsets v1 to be unsupported")),
    # kafka-python's fixture wraps one broker (KAFKA_URI) and creates topics with replication
    # factor 1; against three brokers these two fail on any broker, Kafka's included.
    Skip(KAFKA_PYTHON, "test_admin_integration::test_alter_replica_log_dirs",
         AssumesOneBroker("moves partition 0 of a replication-factor-1 topic on the first broker "
                          "DescribeLogDirs lists, which hosts it only if it is its leader: "
                          "the others answer that they hold no replica")),
    Skip(KAFKA_PYTHON, "test_admin_integration::test_delete_records",
         AssumesOneBroker("expects one poll() to return the records of all six partitions: "
                          "the consumer resets positions with one ListOffsets per leader and "
                          "returns from poll() with the first leader's fetched records")),
    # Its topic is created through kafka-topics.sh (Apache Kafka's own since issue 14) with
    # segment.bytes=10000: Kafka 4's TopicCommand and brokers require at least 1 MiB (KIP-1030).
    Skip(LIBRDKAFKA, "0077_compaction",
         OlderKafkaOnly((4, 0), "kafka-topics.sh --config segment.bytes=10000, below Kafka 4's "
                        "1 MiB minimum")),
    Skip(LIBRDKAFKA, "0082_fetch_max_bytes", QuickMode()),
    Skip(LIBRDKAFKA, "0092_mixed_msgver",
         RemovedInKafka("message format v1 (Produce v2)", "4.0")),
    Skip(LIBRDKAFKA, "0098_consumer_txn",
         NeedsJavaTools("tests/java TransactionProducerCli, built against kafka-clients")),
    Skip(LIBRDKAFKA, "0101_fetch_from_follower",
         NeedsBrokers(3, "three replicas on brokers with three broker.rack values")),
    # KIP-392: the consumer fetches from the replica in its client.rack (RACK<id>, set by
    # compat.samsa_cluster; replica.selector.class from conf/cluster), which must hold the
    # leader's records; a test may name several needs, each checked on its own. Passes on three
    # nodes (the follower's rxbytes ~450x the leader's).
    Skip(LIBRDKAFKA, "0101_fetch_from_follower",
         NeedsReplicatedData("rack-aware fetching from a follower, KIP-392")),
    Skip(LIBRDKAFKA, "0126_oauthbearer_oidc", NeedsSecurity("SASL mechanism", "OAUTHBEARER")),
    # KIP-848's consumer protocol; under the classic protocol the test skips itself.
    Skip(LIBRDKAFKA, "0153_memberid", NeedsApi(68)),
)


def applicable(suite: str, facts: Facts,
               table: tuple[Skip, ...] = TOLERATED_SKIPS) -> dict[str, str]:
    """``{test: reason}`` of the suite's entries whose condition holds now; a test named by
    several entries gets the reasons of those that hold, joined by "; "."""
    reasons: dict[str, list[str]] = {}
    for entry in table:
        if entry.suite == suite and entry.reason.applies(facts):
            reasons.setdefault(entry.test, []).append(entry.reason.describe())
    return {test: "; ".join(described) for test, described in reasons.items()}


def entries(suite: str, table: tuple[Skip, ...] = TOLERATED_SKIPS) -> list[str]:
    """The tests the table names for ``suite`` (each once), whether their condition holds or
    not."""
    return list(dict.fromkeys(entry.test for entry in table if entry.suite == suite))

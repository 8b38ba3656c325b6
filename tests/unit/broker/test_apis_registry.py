"""The API registry: every handler module registers itself; ApiVersions is computed from it."""

from __future__ import annotations

from broker.apis import BROKER_LISTENER, load_apis, served_on
from broker.apis.api_versions import supported_versions, unsupported_version_frame
from protocol.messages import REQUESTS
from protocol.messages.api_versions_response import ApiVersionsResponse

# Kafka 4's lowest versions (KIP-896) for what this broker serves; FindCoordinator v0 and
# JoinGroup v0-v1 as Kafka 4.0.1+ serves them (KAFKA-19444: librdkafka before 2.11 needs them).
KAFKA_4_MINIMUM = {
    0: 3, 1: 4, 2: 1, 3: 0, 18: 0, 19: 2, 20: 1, 21: 0, 22: 0, 23: 2, 32: 1, 33: 0, 35: 1,
    37: 0, 44: 0, 60: 0, 34: 1, 43: 0, 75: 0,
    45: 0, 46: 0,  # AlterPartitionReassignments, ListPartitionReassignments
    8: 2, 9: 1, 47: 0,  # OffsetCommit, OffsetFetch, OffsetDelete
    10: 0, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0, 16: 0, 42: 0,  # the classic group APIs
    24: 0, 25: 0, 26: 0, 27: 1, 28: 0, 65: 0, 66: 0,  # transactions (WriteTxnMarkers v0 is gone)
    61: 0,  # DescribeProducers (KIP-664)
    29: 1, 30: 1, 31: 1,  # DescribeAcls, CreateAcls, DeleteAcls (v0 is gone)
    55: 0,  # DescribeQuorum
    17: 0, 36: 0, 50: 0, 51: 0,  # SaslHandshake, SaslAuthenticate, Describe/AlterUserScramCredentials
    76: 1, 77: 1,  # ShareGroupHeartbeat, ShareGroupDescribe (v0 was Kafka 4.0's early access)
    90: 0, 91: 0, 92: 0,  # Describe/Alter/DeleteShareGroupOffsets
    83: 0, 84: 0, 85: 0, 86: 0, 87: 0,  # the share coordinator's state APIs (KIP-932)
    78: 1, 79: 1,  # ShareFetch, ShareAcknowledge (KIP-932)
}
# Served below the schema's maximum: ShareFetch/ShareAcknowledge v2 (ShareAcquireMode, RENEW)
BELOW_SCHEMA_MAXIMUM = {78: 1, 79: 1}
# SamsaDescribeLogSegments, SamsaConditionalProduce, SamsaReadKey (protocol/schemas/)
SAMSA_APIS = {10000: 0, 10001: 0, 10002: 0, 10003: 0}
CONTROLLER_ONLY_APIS = {
    58: 0,  # Envelope (KIP-590)
    52: 0, 53: 0, 54: 0, 59: 0,  # Vote, BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot
    62: 0, 63: 0, 67: 0,  # BrokerRegistration, BrokerHeartbeat, AllocateProducerIds (KIP-631)
    56: 0,  # AlterPartition (KIP-497)
}


def test_every_module_registers_its_range_up_to_the_schema_maximum() -> None:
    registry = load_apis()
    assert ({key: spec.min_version for key, spec in registry.items()}
            == KAFKA_4_MINIMUM | SAMSA_APIS | CONTROLLER_ONLY_APIS)
    for key, spec in registry.items():
        assert spec.max_version == BELOW_SCHEMA_MAXIMUM.get(key, REQUESTS[key].MAX_VERSION)
        assert spec.name


def test_api_versions_lists_the_registry() -> None:
    registry = served_on(load_apis(), BROKER_LISTENER)
    listed = {v.api_key: (v.min_version, v.max_version) for v in supported_versions()}
    assert listed == {key: s.advertised_range for key, s in registry.items()}
    assert set(registry) == set(KAFKA_4_MINIMUM) | set(SAMSA_APIS)  # all but controller-only
    # Listed from v0, served from v3, as Kafka 4 (KAFKA-18659).
    assert listed[0] == (0, registry[0].max_version) and registry[0].min_version == 3


def test_unsupported_api_versions_reply_is_v0_with_our_range() -> None:
    frame = unsupported_version_frame(42)
    assert frame[4:8] == (42).to_bytes(4, "big")
    response = ApiVersionsResponse.decode(frame[8:], 0)
    assert response.error_code == 35
    assert [(v.api_key, v.min_version, v.max_version) for v in response.api_keys] == [(18, 0, 4)]


def test_handler_modules_open_with_their_version_range() -> None:
    import importlib

    for key, spec in load_apis().items():
        module = importlib.import_module(spec.handle.__module__)
        assert module.__doc__ is not None
        assert module.__doc__.startswith(f"{spec.name}: v{spec.min_version}–v{spec.max_version}"), key

"""Group configs (the GROUP config resource): Kafka's GroupConfig validation, the records a
change writes, their replay into the image, and the entries DescribeConfigs returns."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.config_admin import ConfigSource, describe_group
from protocol.errors import InvalidConfigError, InvalidRequestError
from replication.metadata.config_control import (
    DELETE,
    SET,
    AlterOperation,
    incremental_changes,
    plan_config_records,
)
from replication.metadata.group_config import (
    GROUP_CONFIG_DEFAULTS,
    ShareGroupSettings,
    share_settings,
    validate_group_configs,
)
from replication.metadata.image import GROUP_RESOURCE_TYPE, MetadataImage
from storage.config import LogConfig


def _alter(image: MetadataImage, group: str, *ops: tuple[str, int, str | None]) -> None:
    current = dict(image.group_configs.get(group, {}))
    changes = incremental_changes(
        current, [AlterOperation(*op) for op in ops], list_keys=(), defaults=GROUP_CONFIG_DEFAULTS
    )
    for record in plan_config_records(
        image, GROUP_RESOURCE_TYPE, group, changes, default_config=LogConfig()
    ):
        image.apply(record)


def test_set_and_delete_of_a_group_that_does_not_exist() -> None:
    """What 0081's IncrementalAlterConfigs does: SET then DELETE consumer.session.timeout.ms."""
    image = MetadataImage()
    _alter(image, "my-group", ("consumer.session.timeout.ms", SET, "50000"))
    assert image.group_configs == {"my-group": {"consumer.session.timeout.ms": "50000"}}
    entries = {entry.name: entry for entry in describe_group(image, "my-group")}
    assert set(entries) == set(GROUP_CONFIG_DEFAULTS)
    session = entries["consumer.session.timeout.ms"]
    assert (session.value, session.source) == ("50000", ConfigSource.GROUP_CONFIG)
    assert entries["consumer.heartbeat.interval.ms"].source == ConfigSource.DEFAULT_CONFIG

    _alter(image, "my-group", ("consumer.session.timeout.ms", DELETE, None))
    assert image.group_configs == {}
    assert all(e.source == ConfigSource.DEFAULT_CONFIG for e in describe_group(image, "my-group"))


def test_an_unchanged_value_writes_no_record() -> None:
    image = MetadataImage()
    _alter(image, "g", ("share.record.lock.duration.ms", SET, "20000"))
    changes = {"share.record.lock.duration.ms": "20000"}
    assert plan_config_records(image, GROUP_RESOURCE_TYPE, "g", changes,
                               default_config=LogConfig()) == ()


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"consumer.session.timeout.ms": "44999"}, "greater than or equal to group.consumer.min"),
        ({"consumer.session.timeout.ms": "60001"}, "less than or equal to group.consumer.max"),
        ({"consumer.heartbeat.interval.ms": "0"}, "Value must be at least 1"),
        ({"share.record.lock.duration.ms": "999"}, "Value must be at least 1000"),
        ({"share.heartbeat.interval.ms": "fast"}, "Not a number of type INT"),
        ({"group.protocol": "consumer"}, "Unknown group config name: group.protocol"),
        ({"share.delivery.count.limit": "11"}, "less than or equal to group.share.max.delivery"),
        ({"share.delivery.count.limit": "1"}, "Value must be at least 2"),
        ({"share.partition.max.record.locks": "4001"}, "less than or equal to group.share.max.partition"),
        ({"share.auto.offset.reset": "by_duration:PT1H"}, "String must be one of: latest, earliest"),
        ({"share.isolation.level": "serializable"}, "share.isolation.level"),
        ({"samsa.share.dead.letter.topic": "no spaces"}, "not a legal topic name"),
        ({"samsa.share.record.expiry.ms": "0"}, "must be -1 \\(never\\) or positive"),
        ({"share.renew.acknowledge.enable": "true"}, "Unknown group config name"),
    ],
)
def test_bad_group_configs_are_invalid_config(configs: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        validate_group_configs(configs)


def test_a_group_needs_a_name() -> None:
    with pytest.raises(InvalidRequestError, match="Default group resources are not allowed"):
        plan_config_records(MetadataImage(), GROUP_RESOURCE_TYPE, "",
                            {"consumer.session.timeout.ms": "50000"}, default_config=LogConfig())
    with pytest.raises(InvalidRequestError, match="Group name must not be empty"):
        describe_group(MetadataImage(), "")


@given(st.integers(40000, 65000), st.integers(4000, 16000))
def test_consumer_bounds_match_the_model(session: int, heartbeat: int) -> None:
    configs = {"consumer.session.timeout.ms": str(session),
               "consumer.heartbeat.interval.ms": str(heartbeat)}
    valid = 45000 <= session <= 60000 and 5000 <= heartbeat <= 15000 and session > heartbeat
    if valid:
        assert validate_group_configs(configs)["consumer.session.timeout.ms"] == session
    else:
        with pytest.raises(InvalidConfigError):
            validate_group_configs(configs)


def test_share_keys_are_described_with_their_types() -> None:
    image = MetadataImage()
    _alter(image, "q", ("samsa.share.dead.letter.topic", SET, "q-dlq"),
           ("share.auto.offset.reset", SET, "earliest"))
    entries = {entry.name: entry for entry in describe_group(image, "q")}
    assert (entries["samsa.share.dead.letter.topic"].value, entries["samsa.share.dead.letter.topic"].config_type,
            entries["samsa.share.dead.letter.topic"].source) == ("q-dlq", 2, ConfigSource.GROUP_CONFIG)
    assert (entries["samsa.share.record.expiry.ms"].value, entries["samsa.share.record.expiry.ms"].config_type) == ("-1", 5)
    assert (entries["share.delivery.count.limit"].value, entries["share.delivery.count.limit"].config_type) == ("5", 3)
    assert entries["share.isolation.level"].value == "read_uncommitted"


def test_share_settings_take_the_group_configs_over_the_broker_defaults() -> None:
    image = MetadataImage()
    defaults = ShareGroupSettings(delivery_count_limit=7, record_lock_duration_ms=20000, max_size=3)
    assert share_settings(image, "q", defaults=defaults) == defaults
    assert share_settings(image, "q") == ShareGroupSettings()
    _alter(image, "q", ("share.delivery.count.limit", SET, "3"),
           ("samsa.share.dead.letter.topic", SET, "q-dlq"),
           ("samsa.share.record.expiry.ms", SET, "60000"),
           ("share.heartbeat.interval.ms", SET, "6000"))
    settings = share_settings(image, "q", defaults=defaults)
    assert (settings.delivery_count_limit, settings.record_lock_duration_ms, settings.max_size) == (3, 20000, 3)
    assert (settings.dead_letter_topic, settings.record_expiry_ms, settings.heartbeat_interval_ms) == \
        ("q-dlq", 60000, 6000)
    _alter(image, "q", ("samsa.share.dead.letter.topic", SET, ""), ("samsa.share.record.expiry.ms", SET, "-1"))
    settings = share_settings(image, "q", defaults=defaults)
    assert (settings.dead_letter_topic, settings.record_expiry_ms) == (None, None)

"""The share consumer's configuration and member ids, without sockets."""

from __future__ import annotations

import base64
import uuid

import pytest

from samsa._share_membership import new_member_id
from samsa.config import parse_config
from samsa.errors import ConfigError


def test_share_consumer_config_has_kafkas_names_and_defaults() -> None:
    config = parse_config("share_consumer", {"group.id": "g"})
    assert config["share.acknowledgement.mode"] == "implicit"
    assert (config["max.poll.records"], config["fetch.max.wait.ms"]) == (500, 500)
    explicit = parse_config("share_consumer", {"group.id": "g"},
                            {"share_acknowledgement_mode": "explicit"})
    assert explicit["share.acknowledgement.mode"] == "explicit"


@pytest.mark.parametrize("settings", [
    {},  # no group.id
    {"group.id": "g", "share.acknowledgement.mode": "manual"},
    {"group.id": "g", "enable.auto.commit": "true"},  # a classic consumer's key
])
def test_bad_share_consumer_config_is_refused(settings: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        parse_config("share_consumer", settings)


def test_member_ids_are_random_uuids_in_kafkas_form() -> None:
    ids = {new_member_id() for _ in range(200)}
    assert len(ids) == 200
    for member_id in ids:
        assert len(member_id) == 22 and not member_id.startswith("-")
        assert uuid.UUID(bytes=base64.urlsafe_b64decode(member_id + "=="))

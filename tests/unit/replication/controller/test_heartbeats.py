"""``BrokerHeartbeatManager``: KIP-631's broker states, table-driven, and session bookkeeping on
an injected clock."""

from __future__ import annotations

import pytest

from protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from replication.controller.heartbeats import BrokerControlState as State
from replication.controller.heartbeats import BrokerHeartbeatManager

REGISTERED_AT = 100


def manager_in(state: State) -> BrokerHeartbeatManager:
    manager = BrokerHeartbeatManager(9000)
    manager.register(1, state is State.FENCED, now_ms=0)
    if state is State.CONTROLLED_SHUTDOWN:
        manager.maybe_update_controlled_shutdown_offset(1, 200)
    return manager


@pytest.mark.parametrize(("state", "request_fields", "leaderships", "expected"), [
    (State.FENCED, {"want_shut_down": True}, False, State.SHUTDOWN_NOW),
    (State.FENCED, {"current_metadata_offset": 99}, False, State.FENCED),
    (State.FENCED, {"current_metadata_offset": 100}, False, State.UNFENCED),
    (State.FENCED, {"current_metadata_offset": 100, "want_fence": True}, False, State.FENCED),
    (State.UNFENCED, {}, True, State.UNFENCED),
    (State.UNFENCED, {"want_fence": True}, True, State.FENCED),
    (State.UNFENCED, {"want_fence": True, "want_shut_down": True}, True, State.SHUTDOWN_NOW),
    (State.UNFENCED, {"want_shut_down": True}, True, State.CONTROLLED_SHUTDOWN),
    (State.UNFENCED, {"want_shut_down": True}, False, State.SHUTDOWN_NOW),
    (State.CONTROLLED_SHUTDOWN, {"want_shut_down": True}, True, State.CONTROLLED_SHUTDOWN),
    (State.CONTROLLED_SHUTDOWN, {"want_shut_down": True}, False, State.SHUTDOWN_NOW),
])
def test_next_state(state: State, request_fields: dict[str, object], leaderships: bool,
                    expected: State) -> None:
    manager = manager_in(state)
    request = BrokerHeartbeatRequest(broker_id=1, **request_fields)  # type: ignore[arg-type]
    current, following = manager.next_state(1, request, REGISTERED_AT,
                                            has_leaderships=leaderships)
    assert (current, following) == (state, expected)


def test_controlled_shutdown_waits_for_the_lowest_active_offset() -> None:
    manager = manager_in(State.CONTROLLED_SHUTDOWN)
    manager.register(2, False, now_ms=0)
    manager.touch(2, False, 199, now_ms=0)
    request = BrokerHeartbeatRequest(broker_id=1, want_shut_down=True)
    assert manager.lowest_active_offset() == 199  # broker 1 itself is not active
    assert manager.next_state(1, request, 0, has_leaderships=False)[1] is State.CONTROLLED_SHUTDOWN
    manager.touch(2, False, 200, now_ms=0)
    assert manager.next_state(1, request, 0, has_leaderships=False)[1] is State.SHUTDOWN_NOW


def test_sessions_expire_oldest_first_and_fencing_ends_them() -> None:
    manager = BrokerHeartbeatManager(9000)
    manager.register(1, False, now_ms=0)
    manager.register(2, False, now_ms=500)
    manager.register(3, True, now_ms=0)  # fenced: no session to expire
    assert manager.next_check_time_ms() == 9000
    assert manager.find_one_stale_broker(9000) is None
    assert manager.find_one_stale_broker(9001) == 1
    manager.fence(1)
    assert not manager.has_valid_session(1, 9001)
    assert manager.find_one_stale_broker(9001) is None
    assert manager.find_one_stale_broker(9501) == 2
    manager.touch(2, False, 5, now_ms=9400)
    assert manager.has_valid_session(2, 18400) and not manager.has_valid_session(2, 18401)


def test_fencing_leaves_controlled_shutdown() -> None:
    manager = manager_in(State.CONTROLLED_SHUTDOWN)
    manager.touch(1, True, 10, now_ms=1)
    assert manager.current_state(1) is State.FENCED
    with pytest.raises(ValueError):
        manager.maybe_update_controlled_shutdown_offset(1, 300)


def test_register_keeps_the_metadata_offset_only_across_a_fencing_change() -> None:
    manager = BrokerHeartbeatManager()
    manager.register(1, True, now_ms=0)
    manager.touch(1, True, 42, now_ms=0)
    manager.register(1, False, now_ms=1)
    assert manager.sessions[1].metadata_offset == 42
    manager.register(1, False, now_ms=2)
    assert manager.sessions[1].metadata_offset == -1

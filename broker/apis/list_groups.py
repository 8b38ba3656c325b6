"""ListGroups: v0–v5.

Every group this node coordinates (all of them), with its protocol type, its state (v4+, by
Kafka's names: "Empty", "PreparingRebalance", "CompletingRebalance", "Stable") and its type
(v5+, "classic", or "share" for a share group, whose protocol type is "share" and state
"Empty" or "Stable", as Kafka lists them). ``states_filter`` (v4+) and ``types_filter`` (v5+) match without
regard to case, as in Kafka; an empty filter matches everything. While any
``__consumer_offsets`` partition is loading, the answer is COORDINATOR_LOAD_IN_PROGRESS and no
groups (Kafka 4's GroupCoordinatorService fails the whole listing the same way).

Authorization (with an authorizer): DESCRIBE on the cluster lists every group; otherwise
only the groups the principal may DESCRIBE are listed.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize, authorize_cluster
from broker.auth.acl import AclOperation, ResourceType
from broker.group.classic import ClassicGroup
from broker.share.share_group import ShareGroup
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.list_groups_request import ListGroupsRequest
from protocol.messages.list_groups_response import ListedGroup, ListGroupsResponse

CLASSIC_GROUP_TYPE = "classic"
SHARE_GROUP_TYPE = "share"  # Kafka's ShareGroup: its type and its protocol type


def handle(context: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    coordinator = context.broker.group_coordinator
    if coordinator.loading:
        return ListGroupsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    states = {state.lower() for state in request.states_filter}
    types = {group_type.lower() for group_type in request.types_filter}
    listed = [_listed(group) for group in coordinator.groups.values()]
    listed += [_listed_share(group) for group in coordinator.share.groups.values()]
    if not authorize_cluster(context, AclOperation.DESCRIBE):
        listed = [g for g in listed
                  if authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
    return ListGroupsResponse(groups=[group for group in listed if _matches(group, states, types)])


def _matches(group: ListedGroup, states: set[str], types: set[str]) -> bool:
    return ((not states or group.group_state.lower() in states)
            and (not types or group.group_type in types))


def _listed(group: ClassicGroup) -> ListedGroup:
    return ListedGroup(group_id=group.group_id, protocol_type=group.protocol_type or "",
                       group_state=group.state.value, group_type=CLASSIC_GROUP_TYPE)


def _listed_share(group: ShareGroup) -> ListedGroup:
    return ListedGroup(group_id=group.group_id, protocol_type=SHARE_GROUP_TYPE,
                       group_state=group.state.value, group_type=SHARE_GROUP_TYPE)


def error_response(request: ListGroupsRequest, error: KafkaError) -> ListGroupsResponse:
    return ListGroupsResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=ListGroupsRequest.API_KEY,
        min_version=0,
        max_version=ListGroupsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="ListGroups",
    )
)

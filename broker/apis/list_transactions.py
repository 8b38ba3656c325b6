"""ListTransactions: v0–v1.

Every transactional id this node coordinates (all of them on a single node; in a cluster those
of the ``__transaction_state`` partitions it leads; COORDINATOR_LOAD_IN_PROGRESS while any of
them loads, as Kafka), filtered as Kafka's
``TransactionStateManager.listTransactionStates``: ``state_filters`` (state names; an unknown
name is returned in ``unknown_state_filters`` and matches nothing), ``producer_id_filters``,
and from v1 ``duration_filter`` (only transactions open longer than that many ms; -1: none).
Ids expiring (Dead) are never listed.

Not implemented: authorization (ids the principal may not describe are not filtered out).

Authorization (with an authorizer): only the transactional ids the principal may DESCRIBE
are listed.
"""

from __future__ import annotations

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.transaction.metadata import TransactionState as State
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.list_transactions_request import ListTransactionsRequest
from protocol.messages.list_transactions_response import ListTransactionsResponse, TransactionState


def handle(context: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    states: list[State] = []
    unknown: list[str] = []
    for name in request.state_filters:
        state = State.from_display_name(name)
        if state is None:
            unknown.append(name)
        else:
            states.append(state)
    if context.broker.transactions.coordinator.partitions.loading:  # Kafka's answer too
        return ListTransactionsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    response = ListTransactionsResponse(error_code=0, unknown_state_filters=unknown)
    if request.state_filters and not states:
        return response  # only unknown states asked for: nothing matches
    listed = context.broker.transactions.coordinator.list_transactions(
        producer_ids=request.producer_id_filters, states=states,
        duration_filter_ms=request.duration_filter,
    )
    response.transaction_states = [
        TransactionState(transactional_id=txn.transactional_id, producer_id=txn.producer_id,
                         transaction_state=txn.state.display_name)
        for txn in sorted(listed, key=lambda txn: txn.transactional_id)
        if authorize(context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                     txn.transactional_id)
    ]
    return response


def error_response(request: ListTransactionsRequest, error: KafkaError) -> ListTransactionsResponse:
    return ListTransactionsResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=ListTransactionsRequest.API_KEY,
        min_version=0,
        max_version=ListTransactionsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="ListTransactions",
    )
)

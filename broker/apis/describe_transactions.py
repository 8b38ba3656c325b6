"""DescribeTransactions: v0–v0.

Per transactional id (Kafka's ``TransactionCoordinator.handleDescribeTransactions``): its
state's name (``Ongoing``, ``PrepareCommit``, ...), producer id and epoch, timeout, start time
(-1 when no transaction is open) and the partitions of the open transaction, by topic.
Errors per id: INVALID_REQUEST for an empty id, TRANSACTIONAL_ID_NOT_FOUND for an unknown or
expiring (Dead) one.

Not implemented: authorization (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

Authorization (with an authorizer): DESCRIBE on each transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from itertools import groupby

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.transaction.metadata import TransactionMetadata
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from protocol.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)


def handle(context: RequestContext, request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    coordinator = context.broker.transactions.coordinator
    states = []
    for transactional_id in request.transactional_ids:
        if not authorize(context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                         transactional_id):
            states.append(TransactionState(
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                transactional_id=transactional_id))
            continue
        found = coordinator.describe(transactional_id)
        if isinstance(found, ErrorCode):
            states.append(TransactionState(error_code=found, transactional_id=transactional_id))
        else:
            states.append(_described(found))
    return DescribeTransactionsResponse(transaction_states=states)


def _described(txn: TransactionMetadata) -> TransactionState:
    topics = [
        TopicData(topic=topic, partitions=[index for _, index in group])
        for topic, group in groupby(sorted(txn.partitions), key=lambda tp: tp[0])
    ]
    return TransactionState(
        error_code=0,
        transactional_id=txn.transactional_id,
        transaction_state=txn.state.display_name,
        transaction_timeout_ms=txn.timeout_ms,
        transaction_start_time_ms=txn.start_timestamp_ms,
        producer_id=txn.producer_id,
        producer_epoch=txn.producer_epoch,
        topics=topics,
    )


def error_response(request: DescribeTransactionsRequest, error: KafkaError) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(transaction_states=[
        TransactionState(error_code=error.code, transactional_id=transactional_id)
        for transactional_id in request.transactional_ids
    ])


SPEC = register(
    ApiSpec(
        api_key=DescribeTransactionsRequest.API_KEY,
        min_version=0,
        max_version=DescribeTransactionsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeTransactions",
    )
)

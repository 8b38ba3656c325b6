"""EndTxn: v0–v5.

Commits or aborts the producer's transaction (``broker.transaction.coordinator``): the
coordinator writes PrepareCommit/PrepareAbort to ``__transaction_state`` and the answer is
NONE from then on; the COMMIT/ABORT markers are then written into every partition of the
transaction (and its ``__consumer_offsets`` partitions, which makes its offsets committed) and
CompleteCommit/CompleteAbort is written — on one node before this answer is sent, unless a
marker must be retried. A retry of an EndTxn that completed answers NONE; one that does not fit
the transaction's state answers INVALID_TXN_STATE; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
below v2. The v5 response carries the producer id and epoch (the current ones).

Not implemented: transactions version 2 (KIP-890 part 2, EndTxn v5 bumping the epoch at the
end of every transaction): v5 is served with version 1 semantics; clients only use version 2
when the broker finalizes the ``transaction.version`` feature, which Samsa does not advertise.

Authorization (with an authorizer): WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from broker.apis import ApiSpec, HandlerResult, RequestContext, register
from broker.auth import authorize
from broker.auth.acl import AclOperation, ResourceType
from broker.replicated_answers import answer_when_replicated, transaction_partition
from protocol.errors import ErrorCode, KafkaError
from protocol.messages.end_txn_request import EndTxnRequest
from protocol.messages.end_txn_response import EndTxnResponse

PRODUCER_FENCED_VERSION = 2


def handle(context: RequestContext, request: EndTxnRequest) -> HandlerResult:
    if not authorize(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    result = context.broker.transactions.coordinator.end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch,
        commit=request.committed,
    )
    error = result.error
    if error is ErrorCode.PRODUCER_FENCED and context.api_version < PRODUCER_FENCED_VERSION:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    response = EndTxnResponse(
        error_code=error, producer_id=result.producer_id, producer_epoch=result.producer_epoch
    )
    return answer_when_replicated(
        context.broker, transaction_partition(context, request.transactional_id), response,
        lambda code: EndTxnResponse(error_code=code))


def error_response(request: EndTxnRequest, error: KafkaError) -> EndTxnResponse:
    return EndTxnResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=EndTxnRequest.API_KEY,
        min_version=0,
        max_version=EndTxnRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="EndTxn",
    )
)

"""Transactions (KIP-98, exactly-once producers) on one node.

- ``metadata``: one transactional id's state machine (Kafka's ``TransactionMetadata``), sans-IO;
- ``coordinator``: the transaction coordinator over all transactional ids (InitProducerId,
  AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, timeouts, expiry, Describe/ListTransactions),
  sans-IO: its log and marker writer are injected;
- ``state_log``: the ``__transaction_state`` topic (Kafka's TransactionLogKey/Value records),
  written before a transition completes and replayed at start-up;
- ``markers``: COMMIT/ABORT control batches written straight into partition logs.

The partition side (producer state, last stable offset, ``.txnindex``) is in ``storage``;
the per-API handlers are in ``broker.apis``.
"""

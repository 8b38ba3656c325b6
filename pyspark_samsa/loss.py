"""Data loss: records a query should have read that are gone (retention deleted their segment,
the topic was deleted, a log was truncated).

As Spark's Kafka source: with ``failOnDataLoss`` true (the default) the query fails with a
``DataLossError`` (Spark's IllegalStateException); with false a warning is logged and the
read goes on with what is still there.
"""

from __future__ import annotations

import logging

__all__ = ["DataLossError", "report_data_loss"]

log = logging.getLogger("pyspark_samsa")

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available in Samsa any more; either the "
    "data was aged out by Samsa or the topic may have been deleted before all the data in the "
    "topic was processed. If you don't want your streaming query to fail on such cases, set "
    'the source option "failOnDataLoss" to "false".')
INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Samsa any more; either the "
    "data was aged out by Samsa or the topic may have been deleted before all the data in the "
    "topic was processed. If you want your streaming query to fail on such cases, set the "
    'source option "failOnDataLoss" to "true".')


class DataLossError(RuntimeError):
    """Records in the planned range are gone and ``failOnDataLoss`` is true."""


def report_data_loss(message: str, *, fail_on_data_loss: bool) -> None:
    """Raise ``DataLossError`` or log a warning, as ``failOnDataLoss`` says."""
    if fail_on_data_loss:
        raise DataLossError(f"{message} {INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_TRUE}")
    log.warning("%s %s", message, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)

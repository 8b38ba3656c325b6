"""DescribeLogDirs: v1–v4.

Per directory of ``log.dirs`` (its absolute path), as Kafka's ``ReplicaManager.describeLogDirs``:
the requested partitions it holds (``topics`` null = all), every replica hosted here whether
it leads or follows, with their size in bytes, ``offset_lag`` as Kafka's ``getLogEndOffsetLag``
computes it for a current replica (max(this replica's high watermark - its log end offset, 0):
0 on a leader and on a follower alike, since a follower's high watermark never passes its log
end; a log the replica manager does not know gets -1, Kafka's INVALID_OFFSET_LAG) and
is_future false; from v4 the file system's total and usable bytes (``os.statvfs``). An offline
directory -> KAFKA_STORAGE_ERROR for it alone. ``__cluster_metadata`` is not listed (in Kafka the
raft log is not one of the log manager's logs).

Not implemented: future replicas (AlterReplicaLogDirs), ACLs.

Authorization (with an authorizer): DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from protocol.errors import ClusterAuthorizationFailedError, KafkaError, KafkaStorageError
from protocol.messages.describe_log_dirs_request import DescribeLogDirsRequest
from protocol.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from replication.metadata.log import METADATA_TOPIC

logger = logging.getLogger("samsa.broker.apis.describe_log_dirs")

Wanted = Callable[[str, int], bool]
INVALID_OFFSET_LAG = -1  # DescribeLogDirsResponse.INVALID_OFFSET_LAG


def handle(context: RequestContext, request: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not authorize_cluster(context, AclOperation.DESCRIBE):
        return error_response(request, ClusterAuthorizationFailedError())
    wanted = _wanted(request)
    return DescribeLogDirsResponse(
        results=[_describe(context, directory, wanted) for directory in context.broker.log_manager.log_dirs]
    )


def _wanted(request: DescribeLogDirsRequest) -> Wanted:
    if request.topics is None:
        return lambda topic, partition: True
    keys = {(t.topic, p) for t in request.topics for p in t.partitions}
    return lambda topic, partition: (topic, partition) in keys


def _describe(context: RequestContext, directory: Path, wanted: Wanted) -> DescribeLogDirsResult:
    manager = context.broker.log_manager
    log_dir = str(directory.absolute())
    try:
        manager.health[directory].check()
        stats = os.statvfs(directory)
    except (KafkaStorageError, OSError) as error:
        logger.info("describing log dir %s: %s", log_dir, error)
        return DescribeLogDirsResult(error_code=KafkaStorageError.code, log_dir=log_dir)
    topics: dict[str, list[DescribeLogDirsPartition]] = {}
    for (topic, index), log in sorted(manager.logs.items()):
        if log.directory.parent != directory or topic == METADATA_TOPIC or not wanted(topic, index):
            continue
        partition = context.broker.replica_manager.partition(topic, index)
        lag = (INVALID_OFFSET_LAG if partition is None
               else max(partition.high_watermark - log.log_end_offset, 0))
        topics.setdefault(topic, []).append(
            DescribeLogDirsPartition(
                partition_index=index, partition_size=log.size_in_bytes, offset_lag=lag,
                is_future_key=False,
            )
        )
    return DescribeLogDirsResult(
        error_code=0,
        log_dir=log_dir,
        topics=[DescribeLogDirsTopic(name=name, partitions=parts) for name, parts in topics.items()],
        total_bytes=stats.f_blocks * stats.f_frsize,
        usable_bytes=stats.f_bavail * stats.f_frsize,
    )


def error_response(request: DescribeLogDirsRequest, error: KafkaError) -> DescribeLogDirsResponse:
    return DescribeLogDirsResponse(error_code=error.code)


SPEC = register(
    ApiSpec(
        api_key=DescribeLogDirsRequest.API_KEY,
        min_version=1,
        max_version=DescribeLogDirsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="DescribeLogDirs",
    )
)

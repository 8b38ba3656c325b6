"""AlterReplicaLogDirs: v1–v2.

For each requested directory (an absolute path, as DescribeLogDirs reports it) and partition, as
Kafka's ``ReplicaManager.alterReplicaLogDirs``: a path that is not one of ``log.dirs`` ->
LOG_DIR_NOT_FOUND; a partition this node does not hold -> UNKNOWN_TOPIC_OR_PARTITION (Kafka:
REPLICA_NOT_AVAILABLE when the topic exists but this broker holds no replica, which cannot
happen on one node); an offline directory -> KAFKA_STORAGE_ERROR; a partition already in that
directory -> NONE (a no-op, as in Kafka).

Not implemented: moving a replica to another directory (Kafka copies it as a "future" replica
while the current one keeps serving, then swaps). Such a move is refused with INVALID_REQUEST
and a log line saying so; nothing is changed. v0 (Kafka 1.x) is not served, as Kafka 4 does not.

Authorization (with an authorizer): ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
for every partition.
"""

from __future__ import annotations

import logging
from pathlib import Path

from broker.apis import ApiSpec, RequestContext, register
from broker.auth import authorize_cluster
from broker.auth.acl import AclOperation
from protocol.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaError,
    KafkaStorageError,
    LogDirNotFoundError,
    UnknownTopicOrPartitionError,
)
from protocol.messages.alter_replica_log_dirs_request import AlterReplicaLogDirsRequest
from protocol.messages.alter_replica_log_dirs_response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)

logger = logging.getLogger("samsa.broker.apis.alter_replica_log_dirs")


def handle(
    context: RequestContext, request: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    if not authorize_cluster(context, AclOperation.ALTER):
        return error_response(request, ClusterAuthorizationFailedError())
    manager = context.broker.log_manager
    directories = {str(directory.absolute()): directory for directory in manager.log_dirs}
    results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
    for entry in request.dirs:
        target = directories.get(str(Path(entry.path).absolute()))
        for topic in entry.topics:
            for index in topic.partitions:
                error = _check(context, target, entry.path, topic.name, index)
                results.setdefault(topic.name, []).append(AlterReplicaLogDirPartitionResult(
                    partition_index=index, error_code=0 if error is None else error.code))
    return AlterReplicaLogDirsResponse(results=[
        AlterReplicaLogDirTopicResult(topic_name=name, partitions=partitions)
        for name, partitions in results.items()
    ])


def _check(
    context: RequestContext, target: Path | None, path: str, topic: str, index: int
) -> KafkaError | None:
    manager = context.broker.log_manager
    if target is None:
        return LogDirNotFoundError(f"{path} is not one of log.dirs")
    try:
        manager.health[target].check()
    except KafkaStorageError as error:
        return error
    log = manager.get_log(topic, index)
    if log is None:
        return UnknownTopicOrPartitionError()
    if log.directory.parent == target:
        return None
    logger.warning("AlterReplicaLogDirs: moving %s-%d from %s to %s is not implemented",
                   topic, index, log.directory.parent, target)
    return InvalidRequestError("moving a replica between log directories is not implemented")


def error_response(
    request: AlterReplicaLogDirsRequest, error: KafkaError
) -> AlterReplicaLogDirsResponse:
    return AlterReplicaLogDirsResponse(results=[
        AlterReplicaLogDirTopicResult(topic_name=topic.name, partitions=[
            AlterReplicaLogDirPartitionResult(partition_index=index, error_code=error.code)
            for index in topic.partitions])
        for entry in request.dirs for topic in entry.topics
    ])


SPEC = register(
    ApiSpec(
        api_key=AlterReplicaLogDirsRequest.API_KEY,
        min_version=1,
        max_version=AlterReplicaLogDirsRequest.MAX_VERSION,
        handle=handle,
        error_response=error_response,
        name="AlterReplicaLogDirs",
    )
)

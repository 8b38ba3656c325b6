"""One node without a broker: log manager, replica manager and local controller on a directory,
wired as ``Broker.startup`` wires them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replication.controller.local import LocalController
from replication.replica_manager import ReplicaManager
from storage.clock import ManualClock
from storage.log_manager import LogManager

NODE_ID = 1


@dataclass
class Node:
    log_manager: LogManager
    replica_manager: ReplicaManager
    controller: LocalController

    @classmethod
    def start(cls, directory: Path, clock: ManualClock, *, node_id: int = NODE_ID,
              background_above: int = -1) -> Node:
        log_manager = LogManager([directory], clock=clock)
        log_manager.startup(background_above=background_above,
                            load_now=lambda topic: topic.startswith("__"))
        replica_manager = ReplicaManager(log_manager, node_id=node_id, clock=clock)
        controller = LocalController(
            node_id=node_id, default_num_partitions=1, default_replication_factor=1,
            default_config=lambda: log_manager.default_config,
        )
        replica_manager.startup()
        assert replica_manager.metadata_log is not None
        controller.start(replica_manager.metadata_log)
        return cls(log_manager, replica_manager, controller)

    def shutdown(self) -> None:
        self.log_manager.shutdown()


def with_storage_worker(replica_manager: ReplicaManager,
                        scenario: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``scenario`` on an event loop with the replica manager's disk work on a real
    one-thread executor, as the broker's storage worker; then a clean stop's drain."""
    async def main() -> Any:
        with ThreadPoolExecutor(1, thread_name_prefix="test-storage") as executor:
            replica_manager.use_executor(executor, asyncio.get_running_loop())
            try:
                return await scenario()
            finally:
                await replica_manager.drain()
                replica_manager.disk_work = None

    return asyncio.run(main())

"""``samsa broker start``: the broker process, in the foreground.

Start-up: validate the config (a bad value stops here), load logs and replay the metadata log
(synchronous, before the listeners open), bind the listeners, start loading
``__consumer_offsets`` in the background (group requests answer COORDINATOR_LOAD_IN_PROGRESS
until their partition is loaded), start the scheduled storage work, print ``Samsa broker
started on HOST:PORT`` (the bound port, also when 0 was asked) to stdout.

Stop (SIGTERM or SIGINT): stop accepting, answer the requests in flight, stop the scheduled
work, then close every log (flush, checkpoints, clean-shutdown marker); exit code 0. The
cluster steps (the metadata quorum, replication) are bounded (``stop_step``): one that does not
end in time is logged with where every task of the loop waits, and the stop goes on.
"""

from __future__ import annotations

import asyncio
import io
import logging
import signal
import sys
from collections.abc import Awaitable, Callable

from broker.broker import Broker
from broker.config import BrokerConfig, Listener
from broker.loop import loop_name
from broker.loop import run as run_loop
from broker.metrics import start_metrics
from broker.scheduler import Scheduler
from broker.server import Server
from replication.controller.local import LocalController
from storage.clock import SYSTEM_CLOCK
from storage.log_dirs import lock_log_dirs, unlock_log_dirs

__all__ = ["run", "serve", "stop_step"]

logger = logging.getLogger("samsa.broker")


async def serve(
    config: BrokerConfig,
    *,
    stop: asyncio.Event | None = None,
    on_started: Callable[[list[Listener]], None] | None = None,
) -> None:
    """Run a broker until ``stop`` is set (or SIGTERM/SIGINT when ``stop`` is None)."""
    loop = asyncio.get_running_loop()
    stop = stop or _signal_event(loop)
    broker = Broker.create(config, clock=SYSTEM_CLOCK)
    await loop.run_in_executor(None, broker.startup)
    scheduler = Scheduler(broker)
    broker.storage_executor = scheduler.storage_executor
    # From here on, partition logs are created and deleted on the storage worker (issue 18).
    broker.replica_manager.use_executor(scheduler.storage_executor, loop)
    if isinstance(broker.controller, LocalController):  # metadata writes too (one node)
        broker.controller.use_executor(scheduler.storage_executor, loop)
    server = Server(broker)
    metrics = start_metrics(broker, server, loop)  # None when metrics.port is 0
    # A cluster node serves clients only once its metadata caught up (broker.server)
    bound = await server.start(defer_clients=broker.quorum is not None)
    serving: asyncio.Task[None] | None = None
    if broker.quorum is not None:  # KRaft: the Raft node serves on the controller listener
        broker.quorum.start()
        serving = loop.create_task(_serve_clients_once_caught_up(broker, server))
    if broker.replication is not None:  # KRaft broker: follower fetchers, ISR changes
        broker.replication.start()
    broker.offsets_loader.start()
    broker.transactions.start()  # a cluster's elected __transaction_state partitions
    if broker.share_coordinator is not None:  # a cluster's elected __share_group_state partitions
        broker.share_coordinator.start()
    scheduler.start()
    logger.info("node %d serving on %s (%s)", config.node_id,
                ", ".join(map(str, bound)), loop_name(loop))
    if on_started is not None:
        on_started(bound)
    try:
        await stop.wait()
    finally:
        logger.info("shutting down")
        if serving is not None:
            serving.cancel()
        if broker.quorum is not None:  # a leader resigns first (EndQuorumEpoch)
            session_s = config.kraft.broker_session_timeout_ms / 1000
            await stop_step("the metadata quorum (controlled shutdown, Raft resignation)",
                            broker.quorum.stop(), session_s + STOP_STEP_GRACE_S)
        if broker.replication is not None:
            await stop_step("replication (follower fetchers, ISR changes)",
                            broker.replication.stop(), STOP_STEP_GRACE_S)
        await server.stop()
        await broker.offsets_loader.stop()
        await broker.transactions.stop()
        if broker.share_coordinator is not None:
            await broker.share_coordinator.stop()
        close_persister = getattr(broker.share_persister, "close", None)
        if close_persister is not None:
            await close_persister()
        if broker.share_partitions is not None:
            await broker.share_partitions.close()  # the dead-letter appender's connections
        if isinstance(broker.controller, LocalController):
            await broker.controller.drain()  # metadata writes under way
        await broker.replica_manager.drain()  # logs being created or deleted
        if metrics is not None:
            await loop.run_in_executor(None, metrics.stop)
        await scheduler.stop()
        await loop.run_in_executor(None, broker.shutdown)
        logger.info("shut down cleanly")


async def _serve_clients_once_caught_up(broker: Broker, server: Server) -> None:
    """A cluster node's client listeners serve once the controller says its metadata caught up
    (a controller-only node has no lifecycle and no client listener)."""
    assert broker.quorum is not None
    lifecycle = broker.quorum.lifecycle
    if lifecycle is None:
        return
    await lifecycle.wait_caught_up()
    server.serve_clients()
    logger.info("node %d caught up with the metadata: serving clients", broker.node_id)


# What a bounded stop step may take beyond its own waits (a controlled shutdown waits up to a
# broker session); then the stop goes on without it.
STOP_STEP_GRACE_S = 10.0


async def stop_step(name: str, step: Awaitable[None], timeout_s: float) -> bool:
    """One step of a clean stop, bounded: a clean stop must end. A step still waiting after
    ``timeout_s`` is logged with where each of the loop's tasks waits, and the stop goes on
    without it (the logs are still closed and checkpointed). True if it ended in time."""
    try:
        async with asyncio.timeout(timeout_s):
            await step
    except TimeoutError:
        current = asyncio.current_task()
        stacks = io.StringIO()
        for task in asyncio.all_tasks():
            if task is not current:
                task.print_stack(limit=8, file=stacks)
        logger.warning("stopping: %s did not end within %.0f s; going on without it. Where the "
                       "event loop's tasks wait:\n%s", name, timeout_s, stacks.getvalue())
        return False
    return True


def _signal_event(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    event = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, event.set)
    return event


def _print_started(config: BrokerConfig, bound: list[Listener]) -> None:
    """The first client listener (a controller listener only on a controller-only node)."""
    clients = [b for b in bound if not config.kraft.is_controller_listener(b.name)]
    first = (clients or bound)[0]
    print(f"Samsa broker started on {first.host}:{first.port}", flush=True)


# The interpreter's switch interval in the broker process (Python's default is 5 ms): how long
# the event loop may wait for the GIL while a worker thread runs Python — loading logs, or
# describing and encoding a large Metadata answer off the loop. With 1 ms, a producer's p99
# while another client lists 20,000 partitions without pause went from 31 to 15 ms (max 105 to
# 50 ms); the listing itself took 68 ms instead of 64. Threads that do not contend never switch.
GIL_SWITCH_INTERVAL_S = 0.001


def run(config: BrokerConfig) -> int:
    logging.getLogger("samsa").setLevel(logging.INFO)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    locks = lock_log_dirs(config.log_dirs)  # before anything reads or writes them
    try:
        run_loop(serve(config, on_started=lambda bound: _print_started(config, bound)))
    finally:
        unlock_log_dirs(locks)
    sys.stdout.flush()
    return 0

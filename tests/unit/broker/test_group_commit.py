"""broker.group_commit: a flush future is done only once the fsync ledger shows the data
synced; appends made while a round runs share the next round; a failed sync fails its waiters
with KAFKA_STORAGE_ERROR. Real logs on disk, a real event loop, no sockets."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.group_commit import GroupCommit
from protocol.errors import KafkaStorageError
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.fsync import open_ledger
from storage.log import Log
from tests.unit.storage.helpers import client_batch, release_opened_logs

release_logs = pytest.fixture(autouse=True)(release_opened_logs)

NOW = 1_700_000_000_000
DURABLE = LogConfig(flush_messages=1, message_timestamp_after_max_ms=2**62)
T = TypeVar("T")


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "ledger"
    open_ledger(path)
    yield path
    open_ledger(None)


def synced_lengths(ledger: Path) -> dict[str, int]:
    """The last durable length the ledger records for each file."""
    lengths: dict[str, int] = {}
    for line in ledger.read_text().splitlines():
        record = json.loads(line)
        if record[0] == "f":
            lengths[record[1]] = record[3]
    return lengths


class GatedExecutor(Executor):
    """One worker thread whose first task waits until ``release()``: a sync that takes as long
    as the test wants, without sleeping."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1)
        self._gate = threading.Event()
        self.started = threading.Event()
        self.tasks = 0

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        self.tasks += 1
        first = self.tasks == 1

        def run() -> T:
            if first:
                self.started.set()
                self._gate.wait()
            return fn(*args, **kwargs)

        return self._pool.submit(run)

    def release(self) -> None:
        self._gate.set()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._gate.set()
        self._pool.shutdown(wait=wait)


def open_logs(tmp_path: Path, count: int) -> list[Log]:
    clock = ManualClock(NOW)
    return [Log.open(tmp_path / "data" / f"t-{index}", DURABLE, clock=clock)
            for index in range(count)]


def append(log: Log, value: bytes = b"v") -> int:
    """Append one record; the offset a flush must reach to cover it."""
    result = log.append_as_leader(client_batch([value], timestamp=NOW))
    assert result.flush_due
    return result.last_offset + 1


def test_the_future_is_done_only_after_the_segment_is_synced(tmp_path: Path, ledger: Path) -> None:
    [log] = open_logs(tmp_path, 1)
    executor = GatedExecutor()
    commit = GroupCommit(lambda _: executor)

    async def scenario() -> None:
        flushed = commit.flush(log, append(log))
        await asyncio.to_thread(executor.started.wait)
        assert not flushed.done()
        assert str(log.active_segment.log_path) not in synced_lengths(ledger)
        executor.release()
        await flushed
        assert synced_lengths(ledger)[str(log.active_segment.log_path)] == log.active_segment.size
        assert log.recovery_point == 1

    asyncio.run(scenario())
    executor.shutdown()


def test_appends_during_a_round_share_the_next_round(tmp_path: Path, ledger: Path) -> None:
    logs = open_logs(tmp_path, 8)
    executor = GatedExecutor()
    commit = GroupCommit(lambda _: executor)

    async def scenario() -> None:
        first = commit.flush(logs[0], append(logs[0]))
        await asyncio.to_thread(executor.started.wait)  # round 1 is syncing
        waiting = [commit.flush(log, append(log, b"%d" % n))
                   for n in range(10) for log in logs]  # 80 appends while it runs
        executor.release()
        await asyncio.gather(first, *waiting)

    asyncio.run(scenario())
    [flusher] = commit.flushers.values()
    assert flusher.rounds == 2
    assert flusher.logs_flushed == 1 + len(logs)  # one Log.flush per dirty log per round
    segment_syncs = sum(1 for line in ledger.read_text().splitlines()
                        if json.loads(line)[0] == "f" and json.loads(line)[1].endswith(".log"))
    assert segment_syncs == 1 + len(logs)
    assert all(log.recovery_point == log.log_end_offset == 10 + (log is logs[0])
               for log in logs)
    executor.shutdown()


def test_an_already_synced_offset_is_done_at_once(tmp_path: Path) -> None:
    [log] = open_logs(tmp_path, 1)
    offset = append(log)
    log.flush()
    commit = GroupCommit(lambda _: GatedExecutor())

    async def scenario() -> bool:
        return commit.flush(log, offset).done()

    assert asyncio.run(scenario())
    assert commit.flushers[log.directory.parent].rounds == 0


def test_logs_in_two_log_dirs_have_a_flusher_each(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    logs = [Log.open(tmp_path / f"dir{n}" / "t-0", DURABLE, clock=clock) for n in range(2)]
    commit = GroupCommit()

    async def scenario() -> None:
        await asyncio.gather(*(commit.flush(log, append(log)) for log in logs))

    asyncio.run(scenario())
    assert {path.name for path in commit.flushers} == {"dir0", "dir1"}
    assert all(flusher.rounds == 1 for flusher in commit.flushers.values())
    commit.close()
    assert all(log.recovery_point == 1 for log in logs)


def test_a_failed_sync_fails_its_waiters_with_a_storage_error_and_takes_the_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [log] = open_logs(tmp_path, 1)
    commit = GroupCommit()

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", failing)

    async def scenario() -> None:
        with pytest.raises(KafkaStorageError, match="Input/output error"):
            await commit.flush(log, append(log))

    asyncio.run(scenario())
    commit.close()
    assert log.health.offline_reason is not None
    assert log.recovery_point == 0


def test_a_truncation_during_a_round_keeps_the_recovery_point_below_unsynced_data(
    tmp_path: Path, ledger: Path
) -> None:
    [log] = open_logs(tmp_path, 1)
    executor = GatedExecutor()
    commit = GroupCommit(lambda _: executor)

    async def scenario() -> None:
        for _ in range(4):
            append(log)
        flushed = commit.flush(log, 4)
        await asyncio.to_thread(executor.started.wait)  # the round's target is offset 4
        log.truncate_to(2)  # a new leader's log diverged: offsets 2 and 3 go ...
        again = commit.flush(log, append(log, b"new"))  # ... and offset 2 is written anew
        executor.release()
        await asyncio.gather(flushed, again)

    asyncio.run(scenario())
    assert log.recovery_point == log.log_end_offset == 3
    segment = log.active_segment
    assert synced_lengths(ledger)[str(segment.log_path)] == segment.size  # "new" included
    executor.shutdown()


def test_a_truncation_while_a_flush_syncs_leaves_the_recovery_point_alone(
    tmp_path: Path, ledger: Path
) -> None:
    [log] = open_logs(tmp_path, 1)
    for _ in range(4):
        append(log)
    truncated = False
    real_fdatasync = os.fdatasync

    def truncating_fdatasync(fd: int) -> None:  # the loop truncates while the thread syncs
        nonlocal truncated
        real_fdatasync(fd)
        if not truncated:
            truncated = True
            log.truncate_to(2)
            append(log, b"new")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fdatasync", truncating_fdatasync)
        log.flush(4)
    assert log.log_end_offset == 3
    assert log.recovery_point == 0  # the flush began before the truncation: it proves nothing


class ManualExecutor(Executor):
    """Runs nothing until ``run_pending``: the test decides when a round's syncs happen."""

    def __init__(self) -> None:
        self.pending: list[tuple[Callable[[], Any], Future[Any]]] = []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        self.pending.append((lambda: fn(*args, **kwargs), future))
        return future

    def run_pending(self) -> int:
        tasks, self.pending = self.pending, []
        for task, future in tasks:
            future.set_result(task())
        return len(tasks)


async def settle() -> None:
    """Let the loop run the callbacks a finished round triggers (a few hops: the executor's
    future, the gather, the round's end)."""
    for _ in range(8):
        await asyncio.sleep(0)


operations = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2)),
    st.tuples(st.just("sync"), st.just(0)),
    st.tuples(st.just("truncate"), st.integers(0, 2), st.integers(1, 3)),
), max_size=30)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
def test_the_flusher_against_a_model(tmp_path_factory: pytest.TempPathFactory,
                                     steps: list[tuple[Any, ...]]) -> None:
    """Any interleaving of appends (each asking for its flush), rounds of syncs and
    truncations: a waiter is done only when its offsets are synced (or truncated away), one
    round at most is in flight, a round happens only when asked for, and once the syncs are
    run to the end every waiter is done."""
    logs = open_logs(tmp_path_factory.mktemp("logs"), 3)
    executor = ManualExecutor()
    commit = GroupCommit(lambda _: executor)

    async def scenario() -> None:
        waiters: list[tuple[Log, int, asyncio.Future[None]]] = []
        flush_calls = 0
        for step in steps:
            if step[0] == "append":
                log = logs[step[1]]
                waiters.append((log, append(log), commit.flush(log, log.log_end_offset)))
                flush_calls += 1
            elif step[0] == "sync":
                executor.run_pending()
                await settle()
            else:
                log = logs[step[1]]
                log.truncate_to(max(log.log_start_offset, log.log_end_offset - step[2]))
            check(waiters)
            assert len({id(task) for task, _ in executor.pending}) <= 3  # one round's logs
            assert all(flusher.rounds <= flush_calls for flusher in commit.flushers.values())
        while executor.run_pending():
            await settle()
        check(waiters)
        assert all(future.done() for _, _, future in waiters)

    seen_done: set[int] = set()

    def check(waiters: list[tuple[Log, int, asyncio.Future[None]]]) -> None:
        """Each waiter found done for the first time (futures complete only in an append or a
        round's end, never in a truncation: so this is the state it completed in)."""
        for index, (log, offset, future) in enumerate(waiters):
            if future.done() and index not in seen_done:
                seen_done.add(index)
                assert log.recovery_point >= min(offset, log.log_end_offset)
        for log in logs:
            assert log.recovery_point <= log.log_end_offset

    asyncio.run(scenario())

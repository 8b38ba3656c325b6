"""Transactions in a partition log: markers, the first unstable offset, ``.txnindex`` files
(where entries go, lookups across segments, truncation, retention, the cleaner) and their
rebuild when recovery cuts a segment at any byte, checked against a model computed from the
batches that survive (read with the test helpers' own parser)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import InvalidTxnStateError
from protocol.records import Record, encode_batch
from storage.cleaner import Cleaner
from storage.clock import ManualClock
from storage.config import LogConfig
from storage.log import Log
from storage.producer_state import EndMarker
from storage.transaction_index import AbortedTxn, TransactionIndex
from tests.unit.storage.helpers import crash, valid_prefix

NOW = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=250, retention_ms=-1, file_delete_delay_ms=0)


def txn_batch(producer_id: int, sequence: int, *, count: int = 2, key: bytes = b"k",
              transactional: bool = True, epoch: int = 0) -> bytes:
    records = [Record(i, NOW, key, b"v%d" % (sequence + i)) for i in range(count)]
    return encode_batch(records, base_offset=0, producer_id=producer_id, producer_epoch=epoch,
                        base_sequence=sequence, is_transactional=transactional)


def open_log(path: Path, clock: ManualClock, *, clean: bool = True,
             config: LogConfig = CONFIG, verify: str = "unclean") -> Log:
    return Log.open(path / "topic-0", config, clock=clock, had_clean_shutdown=clean,
                    verify_on_startup=verify)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@dataclass
class Writer:
    """Appends to a log and remembers, by base offset, who wrote what (the model's input)."""

    log: Log
    sequences: dict[int, int]
    kinds: dict[int, tuple[int, str]]

    def data(self, producer_id: int, *, count: int = 2, key: bytes = b"k") -> int:
        sequence = self.sequences.get(producer_id, 0)
        result = self.log.append_as_leader(
            txn_batch(producer_id, sequence, count=count, key=key), transaction_verified=True)
        self.sequences[producer_id] = sequence + count
        self.kinds[result.first_offset] = (producer_id, "txn")
        return result.first_offset

    def marker(self, producer_id: int, *, abort: bool) -> int:
        result = self.log.append_end_marker(producer_id, 0, EndMarker(abort, 0))
        self.kinds[result.first_offset] = (producer_id, "abort" if abort else "commit")
        return result.first_offset


def writer(log: Log) -> Writer:
    return Writer(log, {}, {})


def model_index(kinds: dict[int, tuple[int, str]], base_offsets: list[int]) -> dict[int, list[AbortedTxn]]:
    """Each segment's aborted transactions, from the surviving batches in offset order."""
    open_: dict[int, int] = {}
    entries: dict[int, list[AbortedTxn]] = {base: [] for base in base_offsets}
    for offset in sorted(kinds):
        producer_id, kind = kinds[offset]
        if kind == "txn":
            open_.setdefault(producer_id, offset)
            continue
        first = open_.pop(producer_id, None)
        if kind == "abort" and first is not None:
            lso = min(open_.values(), default=offset + 1)
            segment = max(base for base in base_offsets if base <= offset)
            entries[segment].append(AbortedTxn(producer_id, first, offset, lso))
    return entries


def index_of(log: Log) -> dict[int, list[AbortedTxn]]:
    return {segment.base_offset: list(segment.txn_index.entries) for segment in log.segments}


def test_markers_end_transactions_and_abort_entries_are_indexed(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config=LogConfig(retention_ms=-1))
    w = writer(log)
    assert log.first_unstable_offset is None
    first_1 = w.data(1)
    first_2 = w.data(2)
    w.data(1)
    assert log.first_unstable_offset == first_1 == 0
    marker_1 = w.marker(1, abort=True)
    assert log.first_unstable_offset == first_2
    entry = AbortedTxn(1, first_1, marker_1, first_2)  # producer 2 still holds the LSO back
    assert log.active_segment.txn_index.entries == [entry]
    assert (log.directory / "00000000000000000000.txnindex").read_bytes() == entry.encode()
    w.marker(2, abort=False)  # a commit is not indexed
    assert log.first_unstable_offset is None
    assert log.aborted_transactions(0, log.log_end_offset) == [entry]
    assert log.aborted_transactions(marker_1 + 1, log.log_end_offset) == []
    with pytest.raises(InvalidTxnStateError):  # not verified and no transaction open
        log.append_as_leader(txn_batch(1, 4))


def test_a_marker_alone_changes_nothing_and_is_not_indexed(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    writer(log).marker(5, abort=True)
    assert log.first_unstable_offset is None
    assert not list(log.directory.glob("*.txnindex"))


def test_an_abort_is_found_from_a_fetch_of_an_older_segment(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    w = writer(log)
    first = w.data(1, count=1)
    for _ in range(12):  # other producers' committed transactions fill segments
        w.data(2, count=1)
        w.marker(2, abort=False)
    marker = w.marker(1, abort=True)
    segments = log.segments
    assert len(segments) > 2 and segments[0].txn_index.entries == []
    holding = [s for s in segments if s.base_offset <= marker][-1]
    assert holding.txn_index.entries == [AbortedTxn(1, first, marker, marker + 1)]
    assert log.aborted_transactions(0, log.log_end_offset) == [AbortedTxn(1, first, marker, marker + 1)]


def test_truncation_drops_the_entry_and_reopens_the_transaction(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config=LogConfig(retention_ms=-1))
    w = writer(log)
    first = w.data(1)
    marker = w.marker(1, abort=True)
    assert log.first_unstable_offset is None
    log.truncate_to(marker)
    assert log.active_segment.txn_index.entries == []
    assert log.first_unstable_offset == first


def test_a_clean_restart_keeps_indexes_and_open_transactions(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    w = writer(log)
    for _ in range(6):
        w.data(1)
        w.marker(1, abort=True)
    open_first = w.data(3)
    before = index_of(log)
    log.close()
    reopened = open_log(tmp_path, clock)
    assert index_of(reopened) == before == model_index(w.kinds, list(before))
    assert reopened.first_unstable_offset == open_first


def write_mixed(log: Log) -> Writer:
    w = writer(log)
    w.data(1)
    w.data(2)
    w.marker(1, abort=True)
    w.data(3)
    w.marker(2, abort=True)
    w.data(1)
    w.marker(3, abort=False)
    w.marker(1, abort=True)
    w.data(2)
    w.data(3)
    w.marker(2, abort=True)
    w.marker(3, abort=True)
    return w


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_recovery_after_a_cut_at_any_byte_rebuilds_the_indexes(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("log")
    clock = ManualClock(NOW)
    log = open_log(path, clock)
    kinds = write_mixed(log).kinds
    bases = [segment.base_offset for segment in log.segments]
    assert len(bases) >= 3
    crash(log)
    victim = data.draw(st.sampled_from(bases), label="segment")
    log_path = path / "topic-0" / f"{victim:020d}.log"
    content = log_path.read_bytes()
    cut = data.draw(st.integers(0, len(content)), label="cut")
    log_path.write_bytes(content[:cut])
    prefix = valid_prefix(content[:cut], victim)
    survivors = {b.base_offset for b in prefix}
    # Only an uncut segment keeps the later ones: a cut on a batch boundary shows no bad batch
    # but leaves a hole before the next segment's base offset, which ends the log too.
    whole = cut == len(content)
    later = min((base for base in bases if base > victim), default=None)
    kept = {o: k for o, k in kinds.items()
            if o < victim or o in survivors or (whole and later is not None and o >= later)}
    reopened = open_log(path, clock, clean=False, verify="never")
    assert index_of(reopened) == model_index(kept, [s.base_offset for s in reopened.segments])
    for segment in reopened.segments:  # and on disk, as Kafka would read them
        assert TransactionIndex(segment.txn_index.path, segment.base_offset).entries == (
            segment.txn_index.entries)
    open_ = {}
    for offset in sorted(kept):
        producer_id, kind = kept[offset]
        if kind == "txn":
            open_.setdefault(producer_id, offset)
        else:
            open_.pop(producer_id, None)
    assert reopened.first_unstable_offset == min(open_.values(), default=None)


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_an_index_cut_at_any_byte_is_rebuilt_by_recovery(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    path = tmp_path_factory.mktemp("log")
    log = open_log(path, ManualClock(NOW))
    kinds = write_mixed(log).kinds
    expected = index_of(log)
    crash(log)
    indexes = sorted((path / "topic-0").glob("*.txnindex"))
    victim = data.draw(st.sampled_from(indexes), label="index")
    content = victim.read_bytes()
    victim.write_bytes(content[: data.draw(st.integers(0, len(content)), label="cut")])
    reopened = open_log(path, ManualClock(NOW), clean=False)
    assert index_of(reopened) == expected == model_index(kinds, list(expected))


def test_a_middle_segment_rebuilt_after_a_clean_stop_leaves_every_index_right(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path, clock)
    kinds = write_mixed(log).kinds
    expected = index_of(log)
    log.close()
    middle = sorted(expected)[1]
    (tmp_path / "topic-0" / f"{middle:020d}.index").unlink()  # rebuilt from the log at start
    reopened = open_log(tmp_path, clock)
    assert index_of(reopened) == expected == model_index(kinds, list(expected))


def test_retention_takes_the_index_with_its_segment(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    write_mixed(log)
    first = log.segments[0]
    assert first.txn_index.path.exists()
    log.increment_log_start_offset(log.segments[1].base_offset)
    log.delete_old_segments()
    log.purge_deleted_segments(force=True)
    assert not first.txn_index.path.exists()
    assert not list(log.directory.glob("*.deleted"))


def test_the_cleaner_drops_aborted_records_keeps_markers_and_index_entries(
    tmp_path: Path, clock: ManualClock
) -> None:
    config = LogConfig(segment_bytes=600, retention_ms=-1, file_delete_delay_ms=0,
                       cleanup_policy=("compact",), min_cleanable_dirty_ratio=0.0)
    log = open_log(tmp_path, clock, config=config)
    w = writer(log)
    w.data(1, key=b"a")
    w.marker(1, abort=True)
    w.data(2, key=b"b")
    w.marker(2, abort=False)
    for _ in range(10):
        w.data(3, key=b"c")
        w.marker(3, abort=False)
    expected = [entry for entries in index_of(log).values() for entry in entries]
    stats = Cleaner().clean(log, now_ms=NOW, high_watermark=log.log_end_offset)
    assert stats.aborted_records == 2
    assert [entry for entries in index_of(log).values() for entry in entries] == expected
    markers = [h for _, _, h in log.batches() if h.is_control]
    assert len(markers) == 12  # every marker kept
    kept_keys = {h.producer_id for _, _, h in log.batches() if not h.is_control and h.records_count}
    assert 1 not in kept_keys and 2 in kept_keys


def stored_batches(log: Log) -> list[bytes]:
    """Every batch of ``log`` as its segment files hold it (what a leader sends a follower)."""
    return [batch.data for segment in log.segments
            for batch in valid_prefix(segment.log_path.read_bytes(), segment.base_offset)]


@settings(max_examples=50, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["data", "commit", "abort"]), st.integers(1, 3)),
                    max_size=30),
       chunks=st.lists(st.integers(1, 5), min_size=1, max_size=40))
def test_a_follower_indexes_the_aborts_it_replicates_as_the_leader_did(
    tmp_path_factory: pytest.TempPathFactory,
    ops: list[tuple[str, int]], chunks: list[int],
) -> None:
    """A follower that became leader serves read_committed fetches from its own ``.txnindex``:
    without the ABORTs it replicated, aborted records would show (the fault campaign's G10
    aborted-read)."""
    leader = open_log(tmp_path_factory.mktemp("leader"), ManualClock(NOW))
    w = writer(leader)
    open_txns: set[int] = set()
    for kind, producer_id in ops:
        if kind == "data":
            w.data(producer_id)
            open_txns.add(producer_id)
        elif producer_id in open_txns:
            w.marker(producer_id, abort=kind == "abort")
            open_txns.discard(producer_id)
    follower = open_log(tmp_path_factory.mktemp("follower"), ManualClock(NOW))
    batches = stored_batches(leader)
    position, sizes = 0, iter(chunks * (len(batches) + 1))
    while position < len(batches):  # fetch responses of a few batches each
        size = next(sizes)
        follower.append_as_follower(b"".join(batches[position:position + size]))
        position += size
    expected = model_index(w.kinds, [0])[0]
    assert [entry for segment in leader.segments for entry in segment.txn_index.entries] == expected
    # A fetch of several batches rolls elsewhere than the leader did, and an entry's LSO field is
    # computed after the whole append, as Kafka's follower does (readers use producer id and
    # first offset only): compare the whole log's transactions.
    assert [entry[:3] for segment in follower.segments for entry in segment.txn_index.entries] == [
        entry[:3] for entry in expected]
    assert follower.first_unstable_offset == leader.first_unstable_offset

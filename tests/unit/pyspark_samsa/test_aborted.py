"""read_committed decoding: the records of aborted transactions are left out, checked against
a model of a partition's log with interleaved transactions of several producers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.records import ControlRecordType, Record, encode_batch, encode_control_record
from pyspark_samsa.aborted import AbortedTransactions
from pyspark_samsa.arrow import decode_batches

T = 1_700_000_000_000
PRODUCERS = (11, 12, 13)

# A step: ("plain", n) non-transactional records, ("data", producer, n) records in the
# producer's open transaction (opened by its first data), ("end", producer, commit?).
steps = st.lists(st.one_of(
    st.tuples(st.just("plain"), st.integers(1, 3)),
    st.tuples(st.just("data"), st.sampled_from(PRODUCERS), st.integers(1, 3)),
    st.tuples(st.just("end"), st.sampled_from(PRODUCERS), st.booleans()),
), max_size=30)


class Model:
    """A partition's log as batches, and which offsets a read_committed reader sees."""

    def __init__(self) -> None:
        self.log = bytearray()
        self.offset = 0
        self.open: dict[int, list[int]] = {}  # producer -> offsets of its open transaction
        self.first: dict[int, int] = {}
        self.visible: list[int] = []
        self.aborted: list[tuple[int, int, int]] = []  # producer, first offset, marker offset

    def records(self, count: int) -> list[Record]:
        return [Record(self.offset + n, T + self.offset + n, None, b"v%d" % (self.offset + n))
                for n in range(count)]

    def step(self, step: tuple) -> None:
        if step[0] == "plain":
            self.log += encode_batch(self.records(step[1]))
            self.visible += range(self.offset, self.offset + step[1])
            self.offset += step[1]
        elif step[0] == "data":
            producer, count = step[1], step[2]
            self.log += encode_batch(self.records(count), producer_id=producer, producer_epoch=0,
                                     base_sequence=0, is_transactional=True)
            self.first.setdefault(producer, self.offset)
            self.open.setdefault(producer, []).extend(range(self.offset, self.offset + count))
            self.offset += count
        else:
            self.end(step[1], step[2])

    def end(self, producer: int, commit: bool) -> None:
        if producer not in self.open:
            return  # no transaction to end
        kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        marker = encode_control_record(kind, coordinator_epoch=0, offset=self.offset, timestamp=T)
        self.log += encode_batch([marker], producer_id=producer, producer_epoch=0,
                                 is_transactional=True, is_control=True)
        offsets = self.open.pop(producer)
        if commit:
            self.visible += offsets
        else:
            self.aborted.append((producer, self.first[producer], self.offset))
        del self.first[producer]
        self.offset += 1

    def finish(self) -> None:
        for producer in sorted(self.open):  # every transaction ends: the range is below the LSO
            self.end(producer, producer % 2 == 0)


@settings(deadline=None)
@given(steps, st.data())
def test_read_committed_leaves_out_exactly_the_aborted_records(plan: list, data: st.DataObject
                                                                 ) -> None:
    model = Model()
    for step in plan:
        model.step(step)
    model.finish()
    start = data.draw(st.integers(0, max(model.offset, 0)))
    # what the broker (or the .txnindex) lists for a read from ``start``: transactions whose
    # marker is at or past it
    listed = [(producer, first) for producer, first, marker in model.aborted if marker >= start]
    # fed in two pieces and with a repeat, as consecutive fetches may list them
    aborted = AbortedTransactions(listed[: len(listed) // 2])
    aborted.add(listed)
    decoded = decode_batches(bytes(model.log), start=start, end=model.offset + 1, topic="t",
                             partition=0, include_headers=False, aborted=aborted)
    got = [] if decoded.batch is None else decoded.batch.column("offset").to_pylist()
    assert got == sorted(offset for offset in model.visible if offset >= start)


def test_a_producers_later_committed_transaction_is_kept() -> None:
    model = Model()
    for step in [("data", 11, 2), ("end", 11, False), ("data", 11, 2), ("end", 11, True)]:
        model.step(step)
    aborted = AbortedTransactions([(11, 0)])
    decoded = decode_batches(bytes(model.log), start=0, end=100, topic="t", partition=0,
                             include_headers=False, aborted=aborted)
    assert decoded.batch is not None
    assert decoded.batch.column("offset").to_pylist() == [3, 4]
    # read_uncommitted (no filter): everything but the markers
    everything = decode_batches(bytes(model.log), start=0, end=100, topic="t", partition=0,
                                include_headers=False)
    assert everything.batch is not None
    assert everything.batch.column("offset").to_pylist() == [0, 1, 3, 4]

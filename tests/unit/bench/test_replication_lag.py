"""``bench.replication_lag``: the log end read from a segment file's batch headers (checked
against the batches written, cut anywhere), and the lag in records and seconds (checked
against a brute-force model over the leader's samples)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.replication_lag import (
    LagSampler,
    LogEndReader,
    Sample,
    follower_lags,
    records_lag,
    summarize_lags,
    time_lag_s,
    walk_batches,
)
from protocol.records import Record, encode_batch


def batches(counts: list[int], first_offset: int = 0) -> tuple[bytes, list[tuple[int, int]]]:
    """Batches of ``counts`` records each, back to back: the bytes, and each batch's
    (end position, next offset)."""
    data, ends, offset = b"", [], first_offset
    for count in counts:
        records = [Record(offset + delta, 1_000 + delta, None, b"v" * 10) for delta in range(count)]
        data += encode_batch(records, base_offset=offset)
        offset += count
        ends.append((len(data), offset))
    return data, ends


counts_lists = st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=8)


@settings(max_examples=100, deadline=None)
@given(counts_lists, st.data())
def test_the_walk_stops_after_the_last_complete_batch(counts: list[int],
                                                      data: st.DataObject) -> None:
    written, ends = batches(counts, first_offset=7)
    cut = data.draw(st.integers(min_value=0, max_value=len(written)))
    visible = written[:cut]
    walked = walk_batches(lambda at, length: visible[at:at + length], position=0,
                          size=len(visible), next_offset=7)
    complete = [end for end in ends if end[0] <= cut]
    assert (walked.position, walked.next_offset) == (complete[-1] if complete else (0, 7))


def test_zeros_where_a_batch_is_being_written_are_not_a_batch() -> None:
    written, ends = batches([3, 2])
    visible = written + bytes(100)
    walked = walk_batches(lambda at, length: visible[at:at + length], position=0,
                          size=len(visible), next_offset=0)
    assert (walked.position, walked.next_offset) == ends[-1]


def test_the_reader_follows_appends_truncation_and_a_new_segment(tmp_path: Path) -> None:
    reader = LogEndReader(tmp_path / "topic-0")
    assert reader.log_end_offset() is None
    reader.directory.mkdir()
    first = reader.directory / f"{0:020d}.log"
    written, _ = batches([2, 3])
    first.write_bytes(written[:-5])
    assert reader.log_end_offset() == 2
    first.write_bytes(written)
    assert reader.log_end_offset() == 5
    first.write_bytes(batches([2])[0])  # truncated below where the walk had got to
    assert reader.log_end_offset() == 2
    (reader.directory / f"{2:020d}.log").write_bytes(batches([4], first_offset=2)[0])
    assert reader.log_end_offset() == 6


# -- the lag ----------------------------------------------------------------------------------


def model_time_lag(times: list[float], ends: list[int], at_s: float, follower: int) -> float:
    """Brute force: scan the samples for the first whose log end is above the follower's."""
    for index, (when, end) in enumerate(zip(times, ends, strict=True)):
        if end > follower:
            if index == 0:
                return at_s - when
            before_t, before = times[index - 1], ends[index - 1]
            fraction = min(max((follower + 1 - before) / (end - before), 0.0), 1.0)
            return max(at_s - (before_t + fraction * (when - before_t)), 0.0)
    return 0.0


leader_histories = st.lists(st.tuples(st.floats(min_value=0.01, max_value=1.0),
                                      st.integers(min_value=0, max_value=1_000)),
                            min_size=1, max_size=30)


def history(steps: list[tuple[float, int]]) -> tuple[list[float], list[int]]:
    times, ends, now, end = [], [], 0.0, 0
    for gap, growth in steps:
        now, end = now + gap, end + growth
        times.append(now)
        ends.append(end)
    return times, ends


@settings(max_examples=200, deadline=None)
@given(leader_histories, st.integers(min_value=0, max_value=40_000))
def test_time_lag_is_the_models(steps: list[tuple[float, int]], follower: int) -> None:
    times, ends = history(steps)
    lag = time_lag_s(times, ends, times[-1], follower)
    assert abs(lag - model_time_lag(times, ends, times[-1], follower)) < 1e-9
    assert 0.0 <= lag <= times[-1] - times[0] + 1e-9
    assert (lag == 0.0) if follower >= ends[-1] else True


@settings(max_examples=100, deadline=None)
@given(leader_histories, st.integers(min_value=0, max_value=20_000),
       st.integers(min_value=0, max_value=20_000))
def test_a_follower_further_ahead_lags_no_longer(steps: list[tuple[float, int]], one: int,
                                                 other: int) -> None:
    times, ends = history(steps)
    behind, ahead = sorted((one, other))
    assert time_lag_s(times, ends, times[-1], ahead) <= time_lag_s(times, ends, times[-1], behind)


def test_lag_of_a_follower_with_no_log_yet_counts_every_record() -> None:
    assert records_lag(10, None) == 10
    assert records_lag(10, 12) == 0
    assert abs(time_lag_s([1.0, 2.0], [0, 10], 3.0, None) - 1.9) < 1e-9  # offset 0 at 1.1 s


def test_follower_lags_at_each_sample() -> None:
    samples = [Sample(0.0, {1: 0, 2: 0, 3: None}),
               Sample(0.1, {1: 100, 2: 50, 3: None}),
               Sample(0.2, {1: 200, 2: 200, 3: 0})]
    lags = follower_lags(0, 1, samples)
    assert [(lag.follower, lag.records) for lag in lags] == [
        (2, 0), (3, 0), (2, 50), (3, 100), (2, 0), (3, 200)]
    assert lags[2].seconds == 0.1 - (0.0 + 51 / 100 * 0.1)
    assert lags[-1].seconds == 0.2 - 0.001
    summary = summarize_lags(lags)
    assert summary["samples"] == 6
    assert summary["records"]["max"] == 200
    assert summary["caught_up_fraction"] == round(3 / 6, 4)


def test_the_sampler_takes_a_last_sample_when_stopped(tmp_path: Path) -> None:
    leader, follower = tmp_path / "node-1" / "t-0", tmp_path / "node-2" / "t-0"
    leader.mkdir(parents=True)
    (leader / f"{0:020d}.log").write_bytes(batches([3, 4])[0])
    sampler = LagSampler({0: {1: leader, 2: follower}}, interval_s=60.0).start()
    samples = sampler.stop()[0]
    assert samples and samples[-1].log_ends == {1: 7, 2: None}
    assert [lag.records for lag in follower_lags(0, 1, samples)][-1] == 7

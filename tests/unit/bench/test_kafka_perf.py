"""``bench.kafka_perf``: the summaries Kafka's perf tools print, read back as numbers.

The sample lines follow the tools' printf formats (ProducerPerformance's final summary,
ConsumerPerformance's CSV header and row); the property test round-trips any figures through
the producer's format."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import kafka_perf

PRODUCER_OUTPUT = """\
123 records sent, 24.6 records/sec (0.00 MB/sec), 12.5 ms avg latency, 200.0 ms max latency.
50000 records sent, 41806.0 records/sec (3.99 MB/sec), 3.21 ms avg latency, 312.00 ms max \
latency, 2 ms 50th, 9 ms 95th, 25 ms 99th, 301 ms 99.9th.
"""
CONSUMER_OUTPUT = """\
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-26 10:00:00:000, 2026-11-26 10:00:03:500, 4.7684, 1.3624, 50000, 14285.7143, 3012, \
488, 9.7713, 102459.0164
"""


def test_the_producer_summary_is_the_final_line_with_percentiles() -> None:
    summary = kafka_perf.parse_producer_summary(PRODUCER_OUTPUT)
    assert summary == {"records": 50000, "records_s": 41806.0, "mb_s": 3.99, "avg_ms": 3.21,
                       "max_ms": 312.0, "p50_ms": 2, "p95_ms": 9, "p99_ms": 25, "p999_ms": 301}


def test_the_consumer_summary_keeps_the_numeric_columns() -> None:
    summary = kafka_perf.parse_consumer_summary(CONSUMER_OUTPUT)
    assert summary["data.consumed.in.nMsg"] == 50000
    assert summary["nMsg.sec"] == pytest.approx(14285.7143)
    assert summary["fetch.nMsg.sec"] == pytest.approx(102459.0164)
    assert summary["rebalance.time.ms"] == 3012
    assert "start.time" not in summary


@pytest.mark.parametrize("parse", [kafka_perf.parse_producer_summary,
                                   kafka_perf.parse_consumer_summary])
def test_output_without_a_summary_is_refused(parse: object) -> None:
    with pytest.raises(ValueError, match="summary"):
        parse("WARN something went wrong\n")  # type: ignore[operator]


@settings(max_examples=50, deadline=None)
@given(records=st.integers(0, 10**9), rate=st.floats(0, 1e7), mb=st.floats(0, 1e4),
       avg=st.floats(0, 1e5), high=st.floats(0, 1e6),
       percentiles=st.lists(st.integers(0, 10**6), min_size=4, max_size=4))
def test_any_producer_summary_round_trips(records: int, rate: float, mb: float, avg: float,
                                          high: float, percentiles: list[int]) -> None:
    line = (f"{records} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), {avg:.2f} ms avg "
            f"latency, {high:.2f} ms max latency, {percentiles[0]} ms 50th, {percentiles[1]} ms "
            f"95th, {percentiles[2]} ms 99th, {percentiles[3]} ms 99.9th.")
    summary = kafka_perf.parse_producer_summary(line)
    assert summary["records"] == records
    assert summary["records_s"] == float(f"{rate:.1f}")
    assert summary["max_ms"] == float(f"{high:.2f}")
    assert [summary[key] for key in ("p50_ms", "p95_ms", "p99_ms", "p999_ms")] == percentiles

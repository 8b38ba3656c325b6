"""``bench.scale.table``: Samsa's scales, then Kafka's, with n/a where Kafka did not run."""

from __future__ import annotations

from rich.console import Console

from bench import scale

ENVIRONMENT = {"date": "2026-11-26T10:00:00+00:00", "nproc": 2, "cpu_model": "test CPU",
               "load_average_before": [0.1, 0.2, 0.3], "load_average_after": [0.4, 0.5, 0.6]}


def render(results: list[scale.ScaleResult]) -> str:
    console = Console(width=400, record=True)
    console.print(scale.table(results, ENVIRONMENT))
    return console.export_text()


def row(text: str, name: str) -> list[str]:
    line = next(line for line in text.splitlines() if line.startswith(f"│ {name} "))
    return [cell.strip() for cell in line.strip("│").split("│")]


def test_kafka_columns_follow_samsas_and_read_na_where_it_did_not_run() -> None:
    results = [scale.ScaleResult(1_000, "samsa", open_files=120, rss_mib=80),
               scale.ScaleResult(1_000, "kafka", open_files=1_300, rss_mib=450),
               scale.ScaleResult(50_000, "samsa", open_files=140, rss_mib=300)]
    text = render(results)
    header = next(line for line in text.splitlines() if "Samsa 1,000" in line)
    assert header.index("Samsa 50,000") < header.index("Kafka 1,000") < header.index("Kafka 50,000")
    assert row(text, "open files") == ["open files", "120", "140", "1,300", "n/a"]
    assert row(text, "RSS MiB") == ["RSS MiB", "80", "300", "450", "n/a"]


def test_a_throughput_step_kafka_skipped_reads_a_dash() -> None:
    results = [scale.ScaleResult(10_000, "samsa", produce_records_per_s={10_000: 5e5}),
               scale.ScaleResult(10_000, "kafka", produce_records_per_s={})]
    assert row(render(results), "produce rec/s, 10,000 active") == [
        "produce rec/s, 10,000 active", "500,000", "-"]

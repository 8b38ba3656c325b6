"""Replication benchmark (issue 12): what replicating a partition three ways costs on one
machine, how far the followers lag, and how fast a partition's leadership fails over.

1. Throughput (``bench.replication_throughput``), in interleaved rounds (``bench.rounds``:
   ``--rounds``, 5; 3 with ``--quick``) on one long-lived three-node cluster: produce
   ``--count`` (1,000,000; 200,000 with ``--quick``) × 100-byte values with ``acks=all`` to a
   6-partition topic of replication factor 3, ``min.insync.replicas=2``, against ``acks=1``
   to a 6-partition topic of replication factor 1; then consume each topic. Reported:
   records/s and MB/s of each, and replicated ÷ unreplicated as the median (min–max) of the
   paired per-round ratios — against the goal (>= 0.6x) and Kafka's own 2014 figures (421k
   against 821k records/s: 0.51x). Also the three nodes' CPU seconds per MB of values, produce
   and consume.
2. Replication lag under that load (``bench.replication_lag``): each follower's log end offset
   against its leader's, read from the replicas' files every 100 ms while the replicated topic
   is produced; the distribution in records and in milliseconds.
3. Leader failover (``bench.replication_failover``): ``--kills`` (20; 3 with ``--quick``) ×
   kill -9 of a replicated partition's leader under an idempotent ``acks=all`` writer; the time
   until a write sent after the kill is acknowledged, min / median / p90 / p99 / max, with
   ``broker.session.timeout.ms`` at Kafka's default 9000 (goal: p99 <= 10 s) and at 3000;
   which kills also hit the active controller.

Prints tables (rich) and writes ``bench/results/replication.json``: every round and every kill,
the date, the machine, the commit and the load. ``--keep DIR`` keeps the nodes' data and logs.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench import replication_failover, replication_lag, replication_throughput, rounds
from bench.distribution import Distribution

RESULTS = Path(__file__).parent / "results"
GOAL_RATIO = 0.6
KAFKA_2014 = {"replicated_records_s": 421_823, "unreplicated_records_s": 821_557,
              "ratio": 0.51,
              "source": "Jay Kreps, 'Benchmarking Apache Kafka: 2 Million Writes Per Second "
                        "(On Three Cheap Machines)', LinkedIn, 2014: one producer thread, "
                        "100-byte records, 6 partitions, 3x synchronous replication "
                        "(acks=-1) vs no replication, three machines"}
LAG_METHOD = " ".join((replication_lag.__doc__ or "").split("\n\n")[1:5]).replace("\n", " ")
COLUMNS = (("produce_records_s", "produce records/s", ",.0f"),
           ("produce_mb_s", "produce MB/s", ",.1f"),
           ("produce_cpu_s_per_mb", "produce CPU s/MB", ".3f"),
           ("consume_records_s", "consume records/s", ",.0f"),
           ("consume_mb_s", "consume MB/s", ",.1f"),
           ("consume_cpu_s_per_mb", "consume CPU s/MB", ".3f"))
NAMES = {"replicated": "acks=all, RF 3, min.insync.replicas 2",
         "unreplicated": "acks=1, RF 1"}
FAILOVER_ROWS = (("failover_s", "kill -> first acks=all write sent after it acknowledged"),
                 ("new_leader_s", "kill -> a survivor's Metadata names a new leader"),
                 ("rejoin_isr_s", "restart -> back in the ISR"))


# -- output -----------------------------------------------------------------------------------


def print_throughput(result: dict[str, Any], console: Console, caption: str) -> None:
    console.print(rounds.comparison_table(
        f"Replicated vs unreplicated: {result['count']:,} × {result['value_bytes']} B values, "
        f"{result['partitions']} partitions, linger.ms={result['linger_ms']}, 3 nodes on this "
        f"machine; median (min–max) of {result['rounds']} interleaved rounds; CPU = the three "
        "nodes' process trees per MB of values", result["summary"], COLUMNS, label="topic",
        caption=caption, names=NAMES))
    ratio = result["summary"]["ratios"].get("unreplicated", {}).get("produce_records_s")
    if ratio is not None:
        verdict = "meets" if ratio["median"] >= GOAL_RATIO else "does NOT meet"
        console.print(f"produce, replicated ÷ unreplicated: {rounds.ratio_cell(ratio)} "
                      f"(paired) — {verdict} the >= {GOAL_RATIO}x goal; Kafka 2014: "
                      f"{KAFKA_2014['ratio']}x (421k ÷ 821k records/s)")
    for system, why in result["summary"]["failures"].items():
        console.print(f"[yellow]{system}: {why[:300]}[/]")


def print_lag(lag: dict[str, Any], console: Console) -> None:
    table = Table(title=f"Replication lag while the replicated topic is produced: each "
                        f"follower vs its leader every 100 ms ({lag.get('samples', 0):,} "
                        f"samples); per round, then median (min–max) over {lag['rounds']} rounds",
                  caption="log end offsets read from each replica's segment files (see "
                          "bench/replication_lag.py)")
    for column in ("lag", "median", "p99", "max"):
        table.add_column(column, justify="left" if column == "lag" else "right")
    for unit, spec in (("records", ",.0f"), ("ms", ",.0f")):
        table.add_row(unit, *(rounds.cell(lag.get(f"{unit}_{statistic}"), spec)
                              for statistic in ("median", "p99", "max")))
    console.print(table)


def print_failover(result: dict[str, Any], console: Console, caption: str) -> None:
    table = Table(title="Partition leader failover: kill -9 of the leader (RF 3, "
                        "min.insync.replicas 2) under an idempotent acks=all writer, seconds "
                        "(nearest-rank percentiles)", caption=caption)
    for column in ("session timeout", "", "n", "min", "median", "p90", "p99", "max",
                   f"p99 <= {result['goal_p99_s']:.0f} s"):
        table.add_column(column, justify="left" if column in ("", "session timeout") else "right")
    for configuration in result["configurations"]:
        session = (f"{configuration['broker_session_timeout_ms']} ms "
                   f"({configuration['controller_kills']}/{configuration['kills']} kills "
                   "hit the controller)")
        for figure, label in FAILOVER_ROWS:
            shape = configuration["distributions"][figure]
            cells = ["-"] * 5 if shape is None else Distribution(
                shape["count"], shape["min"], shape["median"], shape["p90"], shape["p99"],
                shape["max"]).cells(".2f")
            goal = ""
            if figure == "failover_s":
                goal = "yes" if configuration["goal_met"] else "NO"
            table.add_row(session if figure == "failover_s" else "", label,
                          "0" if shape is None else str(shape["count"]), *cells, goal)
    console.print(table)
    for configuration in result["configurations"]:
        missing = {figure: count for figure, count in configuration["missing"].items() if count}
        if missing:
            console.print(f"session {configuration['broker_session_timeout_ms']} ms: kills "
                          f"with no figure (failover within {result['timeout_s']:.0f} s, ISR "
                          f"within {result['rejoin_timeout_s']:.0f} s): {missing}")


# -- entry point ------------------------------------------------------------------------------


def main(*, quick: bool = False, rounds_count: int | None = None, count: int | None = None,
         kills: int | None = None, keep: Path | None = None,
         json_path: Path | None = None) -> dict[str, Any]:
    console = rounds.console()
    environment = rounds.environment()
    rounds_count = rounds_count or (3 if quick else rounds.DEFAULT_ROUNDS)
    # 50,000 records took ~55 ms on today's main: shorter than the lag sampling interval and
    # too short to time; 200,000 and 1,000,000 keep each phase well above a second once the
    # followers replicate.
    count = count or (200_000 if quick else 1_000_000)
    kills = kills or (3 if quick else 20)
    with Progress(console=console, transient=True) as progress:
        throughput = replication_throughput.run(count=count, rounds_count=rounds_count,
                                                progress=progress,
                                                keep=keep and keep / "throughput")
        failover = replication_failover.run(
            kills=kills, progress=progress, keep=keep and keep / "failover",
            rejoin_timeout_s=15.0 if quick else replication_failover.REJOIN_TIMEOUT_S)
    environment = rounds.finish(environment)
    caption = rounds.caption(environment)
    print_throughput(throughput, console, caption)
    print_lag(throughput["lag"], console)
    print_failover(failover, console, caption)
    result = {"bench": "replication", "environment": environment,
              "load": {"count": count, "value_bytes": replication_throughput.VALUE_BYTES,
                       "rounds": rounds_count, "kills": kills},
              "goal_ratio": GOAL_RATIO, "kafka_2014": KAFKA_2014,
              "throughput": throughput, "lag_method": LAG_METHOD, "failover": failover}
    rounds.write_results(result, json_path or RESULTS / "replication.json", console)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200k records, 3 rounds, 3 kills")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 5)")
    parser.add_argument("--count", type=int, help="records per system and round (1,000,000)")
    parser.add_argument("--kills", type=int, help="leader kills per configuration (20)")
    parser.add_argument("--keep", type=Path, help="keep the nodes' data and logs here")
    arguments = parser.parse_args()
    main(quick=arguments.quick, rounds_count=arguments.rounds, count=arguments.count,
         kills=arguments.kills, keep=arguments.keep)

"""Cluster benchmark: what the KRaft quorum costs and how fast it recovers, on this machine.

1. Topic creations per second through the quorum (``bench.cluster_topics``): ``--topics``
   topics (1,000; 1 partition, replication factor 3) created through a node that is not the
   active controller (so forwarding is measured too), one request per topic with 16 in flight,
   and one request naming them all; against a single node (``process.roles`` unset, its
   LocalController fsyncing each commit) as the local limit, in interleaved rounds
   (``--rounds``, 5; each round on freshly started processes). Reported: creations/s, median
   (min–max) of the rounds, and cluster ÷ single node as the median (min–max) of the paired
   per-round ratios, with the quorum elections that happened during the measurements.
2. Controller failover (``bench.cluster_failover``): ``--kills`` (20) kill -9 of the active
   controller with the default timeouts; the distribution (min, median, p90, p99, max) of the
   time until a survivor reports a new leader and until a CreateTopics through a survivor
   succeeds (goal: p99 <= 3 s), each split by the nodes' logs into detection and election.
3. The Raft simulator's time compression is ``bench.raft_sim`` (``make bench`` runs it next).

``--quick``: 100 topics and 3 kills. Prints tables (rich) and writes
``bench/results/cluster.json`` (every round and every kill, the date, the machine, the load).
``--keep DIR`` keeps the nodes' data and logs under DIR instead of a temporary directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench import cluster_failover, cluster_topics, rounds
from bench.distribution import Distribution

RESULTS = Path(__file__).parent / "results"
TOPIC_COLUMNS = (("per_topic", f"1 request per topic, {cluster_topics.IN_FLIGHT} in flight: "
                               "topics/s", ",.0f"),
                 ("one_request", "1 request, every topic: topics/s", ",.0f"))
FAILOVER_ROWS = (
    ("new_leader_s", "new leader reported (DescribeQuorum via a survivor)"),
    ("create_s", "CreateTopics via a survivor succeeds"),
    ("detection_s", "  of which detection (kill -> first survivor stands)"),
    ("election_s", "  of which election (stands -> leader named)"),
    ("epochs", "epochs the election took"),
    ("later_elections", "elections after the new leader, before the CreateTopics"),
    ("rejoin_s", "killed node restarted -> unfenced"),
    ("rejoin_elections", "elections while it rejoined"),
)


def print_topics(result: dict[str, Any], console: Console, caption: str) -> None:
    elections = result["elections"]
    console.print(rounds.comparison_table(
        f"Topic creations through the quorum: {result['topics']:,} topics (1 partition), "
        f"median (min–max) of {result['rounds']} interleaved rounds", result["summary"],
        TOPIC_COLUMNS, caption=f"{caption}; quorum elections during the measurements: "
                               f"{elections.get('cluster', 0)}",
        names={"cluster": "3-node cluster, RF 3, via a non-controller node",
               "single": "single node (LocalController, fsync per commit), RF 1"}))


def print_failover(result: dict[str, Any], console: Console, caption: str) -> None:
    table = Table(title=f"Controller failover: {result['kills']} × kill -9 of the active "
                        "controller, default timeouts (seconds; nearest-rank percentiles)",
                  caption=caption)
    for column in ("", "n", "min", "median", "p90", "p99", "max", "p99 <= 3 s"):
        table.add_column(column, justify="left" if not column else "right")
    for figure, label in FAILOVER_ROWS:
        shape = result["distributions"][figure]
        spec = ".2f" if figure.endswith("_s") else ".0f"
        cells = (["-"] * 5 if shape is None else Distribution(
            shape["count"], shape["min"], shape["median"], shape["p90"], shape["p99"],
            shape["max"]).cells(spec))
        goal = result["goal_met"].get(figure)
        count = "0" if shape is None else str(shape["count"])
        table.add_row(label, count, *cells, "" if goal is None else ("yes" if goal else "NO"))
    console.print(table)
    missing = {figure: count for figure, count in result["missing"].items() if count}
    if missing:
        console.print(f"kills with no figure within {cluster_failover.FAILOVER_TIMEOUT_S:.0f} s "
                      f"(or no log line): {missing}")


def main(*, quick: bool = False, rounds_count: int = rounds.DEFAULT_ROUNDS,
         topics: int | None = None, kills: int | None = None, keep: Path | None = None,
         json_path: Path | None = None) -> dict[str, Any]:
    console = rounds.console()
    environment = rounds.environment()
    with Progress(console=console, transient=True) as progress:
        created = cluster_topics.run(topics=topics or (100 if quick else 1000),
                                     rounds_count=rounds_count, progress=progress,
                                     keep=keep and keep / "topics")
        failover = cluster_failover.run(kills=kills or (3 if quick else 20), progress=progress,
                                        keep=keep and keep / "failover")
    environment = rounds.finish(environment)
    caption = rounds.caption(environment)
    print_topics(created, console, caption)
    print_failover(failover, console, caption)
    result = {"bench": "cluster", "environment": environment, "topic_creations": created,
              "failover": failover}
    rounds.write_results(result, json_path or RESULTS / "cluster.json", console)
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int, default=rounds.DEFAULT_ROUNDS)
    parser.add_argument("--topics", type=int, help="topics per case and round (default 1000)")
    parser.add_argument("--kills", type=int, help="controller kills (default 20)")
    parser.add_argument("--keep", type=Path, help="keep the nodes' data and logs here")
    arguments = parser.parse_args()
    main(quick=arguments.quick, rounds_count=arguments.rounds, topics=arguments.topics,
         kills=arguments.kills, keep=arguments.keep)

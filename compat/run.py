"""``make compat`` / ``make compat-full``: peer client test suites against a real Samsa broker.

    .venv/bin/python -m compat.run [--suite kafka-python|librdkafka|all] [--mode quick|full]
                                   [--tests 0001,0012] [--kafka-python-tests NODE,...]
                                   [--jobs N] [--results DIR] [--fault API_KEY=ERROR_CODE]
                                   [--brokers 1|3]

Each suite gets its own broker on an ephemeral port with a temporary data dir. ``--mode``
chooses librdkafka's quick mode (``-Q``, the default) or its full mode (results in
``librdkafka-full.json``); kafka-python has one mode. Prints a summary table and writes
``<results>/<suite>.json`` (default ``compat/results/``, logs under ``logs/``).

Exit status: 0 when every test passed or was skipped with a reason ``compat/skips.py``
tolerates on this run; 1 on anything else — a failed or errored test, an untolerated skip, a
crash, a missing result file, a timeout, a used-up time budget, a broker that died; 2 when a
suite could not be set up. ``--fault 22=53`` puts ``compat.fault_proxy`` between the clients and
the brokers, answering that API with that error: the harness's own test of a broken broker.

``--brokers 3`` (``make compat-cluster``): every broker a suite would start is a cluster of three
combined-mode Samsa nodes instead (``compat.samsa_cluster``: configured as ``make cluster``'s,
on ephemeral ports, each node's log in ``<results>/logs/``); the suites get a bootstrap list of
all three (kafka-python's fixture takes one address: node 0's), the skip table is checked with
``Facts.brokers`` = 3, and results go to ``<suite>-cluster.json``. Not with ``--fault``.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

from compat import kafka_python_suite, librdkafka_suite
from compat.fault_proxy import Fault
from compat.results import SuiteResult, print_summary
from compat.samsa_broker import ROOT

CACHE = ROOT / ".cache" / "compat"
RESULTS = ROOT / "compat" / "results"


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="compat", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=["kafka-python", "librdkafka", "all"], default="all")
    parser.add_argument("--mode", choices=["quick", "full"], default="quick",
                        help="librdkafka: quick (-Q -E) or full (no -Q, socket emulation)")
    parser.add_argument("--tests", help="librdkafka test numbers, comma-separated")
    parser.add_argument("--kafka-python-tests",
                        help="kafka-python pytest node ids under test/integration, comma-separated")
    parser.add_argument("--jobs", type=int, default=1, help="librdkafka tests run at once")
    parser.add_argument("--results", type=Path, default=RESULTS, help="where results go")
    parser.add_argument("--fault", action="append", default=[], type=Fault.parse,
                        metavar="API_KEY=ERROR_CODE",
                        help="answer this API with this error (the harness's own tests)")
    parser.add_argument("--brokers", type=int, choices=[1, 3], default=1,
                        help="Samsa nodes per broker the suites run against (3: a KRaft cluster)")
    arguments = parser.parse_args(argv)
    if arguments.brokers > 1 and arguments.fault:
        parser.error("--fault needs --brokers 1: the fault proxy fronts one broker")
    return arguments


def _run_suite(suite: str, args: argparse.Namespace) -> SuiteResult:
    faults = tuple(args.fault)
    if suite == "kafka-python":
        selection = args.kafka_python_tests.split(",") if args.kafka_python_tests else None
        return kafka_python_suite.run(CACHE, args.results, selection=selection, faults=faults,
                                      brokers=args.brokers)
    only = args.tests.split(",") if args.tests else None
    return librdkafka_suite.run(CACHE, args.results, full=args.mode == "full", only=only,
                                jobs=args.jobs, faults=faults, brokers=args.brokers)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    CACHE.mkdir(parents=True, exist_ok=True)
    args.results.mkdir(parents=True, exist_ok=True)
    results: list[SuiteResult] = []
    setup_failed = False
    for suite in ("kafka-python", "librdkafka"):
        if args.suite not in (suite, "all"):
            continue
        print(f"compat: running {suite} ...", flush=True)
        try:
            result = _run_suite(suite, args)
        except Exception:
            traceback.print_exc()
            setup_failed = True
            continue
        print(f"compat: {result.suite} done in {result.duration_seconds:.0f}s, "
              f"results in {result.write_json(args.results)}", flush=True)
        results.append(result)
    print_summary(results)
    if setup_failed:
        return 2
    return 1 if any(result.failures() for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())

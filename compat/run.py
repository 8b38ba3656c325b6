"""``make compat``: run peer client test suites against a real Samsa broker.

    .venv/bin/python -m compat.run [--suite kafka-python|librdkafka|all] [--tests 0001,0012]
                                   [--all] [--jobs N]

Each suite gets its own broker on an ephemeral port with a temporary data dir. Prints a
summary table and writes ``compat/results/<suite>.json`` (plus logs under
``compat/results/logs/``). Exit status: 0 when every failure is explained by an API Samsa
does not serve yet, 1 when some failure is not (a possible Samsa bug), 2 when a suite
could not be set up.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from compat import kafka_python_suite, librdkafka_suite
from compat.results import SuiteResult, print_summary
from compat.samsa_broker import ROOT

CACHE = ROOT / ".cache" / "compat"
RESULTS = ROOT / "compat" / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compat", description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", choices=["kafka-python", "librdkafka", "all"], default="all")
    parser.add_argument("--tests", help="librdkafka test numbers, comma-separated")
    parser.add_argument("--all", action="store_true",
                        help="librdkafka: also run tests needing APIs Samsa does not advertise")
    parser.add_argument("--jobs", type=int, default=1, help="librdkafka tests run at once")
    args = parser.parse_args(argv)
    CACHE.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    results: list[SuiteResult] = []
    setup_failed = False
    for suite in ("kafka-python", "librdkafka"):
        if args.suite not in (suite, "all"):
            continue
        print(f"compat: running {suite} ...", flush=True)
        try:
            if suite == "kafka-python":
                result = kafka_python_suite.run(CACHE, RESULTS)
            else:
                only = args.tests.split(",") if args.tests else None
                result = librdkafka_suite.run(CACHE, RESULTS, only=only, run_all=args.all,
                                              jobs=args.jobs)
        except Exception:
            traceback.print_exc()
            setup_failed = True
            continue
        print(f"compat: {suite} done in {result.duration_seconds:.0f}s, "
              f"results in {result.write_json(RESULTS).relative_to(ROOT)}", flush=True)
        results.append(result)
    print_summary(results)
    if setup_failed:
        return 2
    return 1 if any(result.unexplained_failures() for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())

"""``python -m tests.simulation.replication``: run one seed (``--seed N``) or a range
(``--seeds A-B``).

One seed prints its summary, or on a violation the invariant, the tail of the event trace and
the one-line replay command; a range prints progress and, at the end, every failing seed's
invariant and replay command. Exit status 1 if any seed failed.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from tests.simulation.options import parse_seeds
from tests.simulation.replication import broken
from tests.simulation.replication.options import ReplicationOptions, parse_faults
from tests.simulation.replication.simulator import SimulationResult, run_seed


def main(argv: list[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    logging.disable(logging.WARNING)  # the storage layer's truncation warnings: in the trace
    seeds = parse_seeds(arguments.seeds) if arguments.seeds else range(arguments.seed,
                                                                       arguments.seed + 1)
    options = [ReplicationOptions(seed, arguments.brokers, arguments.partitions,
                                  arguments.sim_seconds, parse_faults(arguments.faults),
                                  arguments.variant) for seed in seeds]
    if len(options) == 1:
        result = run_seed(options[0])
        print(result.failure.report() if result.failure else result.summary())
        return 0 if result.ok else 1
    failed: list[SimulationResult] = []
    started = time.perf_counter()
    for count, each in enumerate(options, 1):
        result = run_seed(each)
        if not result.ok:
            failed.append(result)
        if count % 50 == 0 or count == len(options):
            print(f"{count}/{len(options)} seeds, {len(failed)} failed, "
                  f"{time.perf_counter() - started:.1f} s", flush=True)
    for result in failed:
        assert result.failure is not None
        print(f"seed {result.options.seed}: {result.failure.invariant}: "
              f"{result.failure.detail.splitlines()[-1][:300]}")
        print(f"  replay: {result.failure.replay}")
    return 1 if failed else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation.replication",
                                     description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int)
    which.add_argument("--seeds", help="a range, both ends included: 1-1000")
    parser.add_argument("--brokers", type=int, default=3, choices=(3, 5))
    parser.add_argument("--partitions", type=int, default=2, choices=(1, 2))
    parser.add_argument("--sim-seconds", type=float, default=8.0,
                        help="length of the faulty phase (the recovery phase follows)")
    parser.add_argument("--faults", default="all",
                        help="comma-separated: crash,lossy,pause,partition,drop,duplicate,"
                             "reorder,elect; all; none")
    parser.add_argument("--variant", default="real", choices=("real", *broken.VARIANTS),
                        help="a partition with a deliberately broken rule, to check the checker")
    return parser


if __name__ == "__main__":
    sys.exit(main())

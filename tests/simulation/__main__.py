"""``python -m tests.simulation``: run one seed (``--seed N``) or a range (``--seeds A-B``).

One seed prints its summary, or on a violation the invariant, the tail of the event trace and
the one-line replay command; a range prints a progress line and, at the end, every failing
seed's invariant and replay command. Exit status 1 if any seed failed.
"""

from __future__ import annotations

import argparse
import sys
import time

from tests.simulation import broken
from tests.simulation.options import SimulationOptions, parse_faults, parse_seeds
from tests.simulation.simulator import SimulationResult, run_seed


def main(argv: list[str] | None = None) -> int:
    arguments = _parser().parse_args(argv)
    seeds = parse_seeds(arguments.seeds) if arguments.seeds else range(arguments.seed,
                                                                       arguments.seed + 1)
    codec = {"on": True, "off": False, "auto": None}[arguments.codec]
    node_class = broken.node_class(arguments.variant)
    options = [SimulationOptions(seed, arguments.voters, arguments.observers,
                                 arguments.sim_seconds, parse_faults(arguments.faults), codec,
                                 not arguments.no_snapshots, arguments.variant)
               for seed in seeds]
    if len(options) == 1:
        result = run_seed(options[0], node_class)
        print(result.failure.report() if result.failure else result.summary())
        return 0 if result.ok else 1
    return _run_range(options, node_class)


def _run_range(all_options: list[SimulationOptions], node_class: object) -> int:
    failed: list[SimulationResult] = []
    started = time.perf_counter()
    simulated_ms = 0
    for index, options in enumerate(all_options, 1):
        result = run_seed(options, node_class)  # type: ignore[arg-type]
        simulated_ms += result.sim_ms
        if not result.ok:
            failed.append(result)
        elapsed = time.perf_counter() - started
        line = (f"{index}/{len(all_options)} seeds, {len(failed)} failed, "
                f"{simulated_ms / 1000:,.0f} simulated s in {elapsed:.1f} s "
                f"({simulated_ms / 1000 / max(elapsed, 1e-9):,.0f}x)")
        if sys.stdout.isatty():
            sys.stdout.write("\r" + line)
            sys.stdout.flush()
        elif index % 100 == 0 or index == len(all_options):
            print(line, flush=True)
    if sys.stdout.isatty():
        print()
    for result in failed:
        assert result.failure is not None
        print(f"seed {result.options.seed}: {result.failure.invariant}: "
              f"{result.failure.detail.splitlines()[-1][:300]}")
        print(f"  replay: {result.failure.replay}")
    return 1 if failed else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m tests.simulation", description=__doc__)
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--seed", type=int)
    which.add_argument("--seeds", help="a range, both ends included: 1-1000")
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--observers", type=int, default=0)
    parser.add_argument("--sim-seconds", type=float, default=60.0,
                        help="length of the faulty phase (the recovery phase follows)")
    parser.add_argument("--faults", default="all",
                        help="comma-separated: crash,partition,drop,duplicate,reorder; all; none")
    parser.add_argument("--codec", choices=("on", "off", "auto"), default="auto",
                        help="round-trip every message through the codec (auto: 1 seed in 4)")
    parser.add_argument("--no-snapshots", action="store_true")
    parser.add_argument("--variant", default="real", choices=("real", *broken.VARIANTS),
                        help="a deliberately broken core, to check the checker")
    return parser


if __name__ == "__main__":
    sys.exit(main())

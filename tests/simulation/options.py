"""What one simulation run is: the seed and the knobs, and the one-line command that replays it.

A run has two phases. The *faulty phase* lasts ``sim_seconds`` of simulated time: the faults
named in ``faults`` are drawn from the seed (crashes and restarts, partitions that heal, message
drops, duplicates, reordering). Then the *recovery phase*: every partition heals, drops stop,
every stopped node restarts, and Liveness must hold within bounded simulated time (a leader
elected and a new proposal committed within ``ELECTION_BOUND_MS``, every node caught up within
``CATCH_UP_BOUND_MS``). The run ends as soon as every node has caught up.
"""

from __future__ import annotations

from dataclasses import dataclass

FAULTS = ("crash", "partition", "drop", "duplicate", "reorder")
ELECTION_BOUND_MS = 10_000
CATCH_UP_BOUND_MS = 30_000


def parse_faults(text: str, known: tuple[str, ...] = FAULTS) -> tuple[str, ...]:
    """``crash,partition`` -> ("crash", "partition"); ``all`` -> every fault of ``known``;
    ``none`` -> ()."""
    if text == "all":
        return known
    if text in ("none", ""):
        return ()
    names = tuple(name.strip() for name in text.split(","))
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown faults {unknown}; known: {', '.join(known)}")
    return tuple(name for name in known if name in names)


def parse_seeds(text: str) -> range:
    """``7`` -> range(7, 8); ``100-199`` -> range(100, 200) (both ends included)."""
    low, _, high = text.partition("-")
    first = int(low)
    last = int(high) if high else first
    if last < first:
        raise ValueError(f"empty seed range {text}")
    return range(first, last + 1)


@dataclass(frozen=True)
class SimulationOptions:
    seed: int
    voters: int = 3
    observers: int = 0
    sim_seconds: float = 60.0
    faults: tuple[str, ...] = FAULTS
    codec: bool | None = None          # round-trip every message; None: 1 seed in 4 (seeded)
    snapshots: bool = True
    variant: str = "real"              # the RaftNode class: "real" or one of broken.VARIANTS

    @property
    def sim_ms(self) -> int:
        return int(self.sim_seconds * 1000)

    def replay_command(self) -> str:
        """The one line that reruns exactly this run."""
        parts = ["python -m tests.simulation", f"--seed {self.seed}", f"--voters {self.voters}"]
        if self.observers:
            parts.append(f"--observers {self.observers}")
        parts.append(f"--sim-seconds {self.sim_seconds:g}")
        parts.append(f"--faults {','.join(self.faults) or 'none'}")
        if self.codec is not None:
            parts.append(f"--codec {'on' if self.codec else 'off'}")
        if not self.snapshots:
            parts.append("--no-snapshots")
        if self.variant != "real":
            parts.append(f"--variant {self.variant}")
        return " ".join(parts)

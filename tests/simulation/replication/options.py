"""What one run of the replication simulation is: the seed and the knobs, the scaled Kafka
settings, and the one-line command that replays it.

A run has two phases, as the Raft simulation's (``tests.simulation.options``): a *faulty phase*
of ``sim_seconds`` simulated seconds, with the faults named in ``faults`` drawn from the seed,
then a *recovery phase*: every link heals, every broker restarts, leadership settles, the
client's last records are acknowledged, every replica catches up, and the final checks run.

Kafka's timeouts are scaled down by ``TIME_SCALE`` (20) so that a few simulated seconds hold
many ISR changes and elections; their ratios stay Kafka's.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.simulation import options as raft_options

FAULTS = ("crash", "lossy", "pause", "partition", "drop", "duplicate", "reorder", "elect")
TIME_SCALE = 20

# Kafka's defaults, divided by TIME_SCALE.
REPLICA_LAG_TIME_MAX_MS = 30_000 // TIME_SCALE       # replica.lag.time.max.ms
REPLICA_FETCH_WAIT_MAX_MS = 500 // TIME_SCALE        # replica.fetch.wait.max.ms
REPLICA_FETCH_BACKOFF_MS = 1_000 // TIME_SCALE       # replica.fetch.backoff.ms
BROKER_SESSION_TIMEOUT_MS = 9_000 // TIME_SCALE      # broker.session.timeout.ms
BROKER_HEARTBEAT_INTERVAL_MS = 2_000 // TIME_SCALE   # broker.heartbeat.interval.ms
REQUEST_TIMEOUT_MS = 30_000 // TIME_SCALE            # request.timeout.ms (client and brokers)
PRODUCE_TIMEOUT_MS = 30_000 // TIME_SCALE            # the Produce request's timeout_ms (acks=all)
DELIVERY_TIMEOUT_MS = 120_000 // TIME_SCALE          # delivery.timeout.ms (the client gives up)
RETRY_BACKOFF_MS = 100 // TIME_SCALE                 # retry.backoff.ms
HW_CHECKPOINT_INTERVAL_MS = 5_000 // TIME_SCALE      # replica.high.watermark.checkpoint.interval.ms
METADATA_WAIT_MAX_MS = 500 // TIME_SCALE             # the metadata log fetch's long poll
MIN_INSYNC_REPLICAS = 2
REPLICATION_FACTOR = 3
SEGMENT_BYTES = 4096                                 # small: segments roll, recovery spans them

RECOVERY_BOUND_MS = 20_000  # after healing: every ack in, every replica caught up, or Liveness


def parse_faults(text: str) -> tuple[str, ...]:
    """``crash,partition`` -> ("crash", "partition") of this simulator's faults (the Raft
    simulator's parser with this simulator's list)."""
    return raft_options.parse_faults(text, FAULTS)


@dataclass(frozen=True)
class ReplicationOptions:
    seed: int
    brokers: int = 3
    partitions: int = 2
    sim_seconds: float = 8.0
    faults: tuple[str, ...] = FAULTS
    variant: str = "real"          # "real" or one of broken.VARIANTS

    @property
    def sim_ms(self) -> int:
        return int(self.sim_seconds * 1000)

    def replay_command(self) -> str:
        """The one line that reruns exactly this run."""
        parts = ["python -m tests.simulation.replication", f"--seed {self.seed}",
                 f"--brokers {self.brokers}", f"--partitions {self.partitions}",
                 f"--sim-seconds {self.sim_seconds:g}", f"--faults {','.join(self.faults) or 'none'}"]
        if self.variant != "real":
            parts.append(f"--variant {self.variant}")
        return " ".join(parts)

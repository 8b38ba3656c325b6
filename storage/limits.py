"""The operating-system limits a broker with many partitions meets, raised where a process may and
reported with what the partitions need.

- ``RLIMIT_NOFILE`` (``ulimit -n``): descriptors. Start-up raises the soft limit to the hard one
  (``raise_open_files_limit``), as a JVM does by default on Linux (``-XX:+MaxFDLimit``). Samsa
  holds at most ``log.segment.open.files.max`` segment ``.log`` descriptors (the LRU of
  ``storage.open_files``; by default half of the soft limit, the other half left to sockets,
  checkpoints and snapshots), plus those of slices being sent; index maps hold none.
- ``vm.max_map_count``: memory maps per process, one per mapped index. The LRU of mapped indexes
  keeps at most half of it (``default_index_maps_max``); Kafka keeps every index of every
  segment mapped once used, and asks operators to raise the limit instead.

When a limit still bites (EMFILE, ENFILE, or ENOMEM from ``mmap``), ``resource_limit_message``
names it and what to raise; the caller fails that request or that partition only, never the
whole log directory (it is not a disk fault) and never the broker's start-up.
"""

from __future__ import annotations

import errno
import logging
import resource
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger("samsa.storage.limits")

MAX_MAP_COUNT_PATH = Path("/proc/sys/vm/max_map_count")
NR_OPEN_PATH = Path("/proc/sys/fs/nr_open")
# When /proc says nothing (not Linux): a conservative guess at the map limit.
_UNKNOWN_MAX_MAP_COUNT = 65530
_MIN_OPEN_FILES = 16
RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


@dataclass(frozen=True, slots=True)
class ProcessLimits:
    open_files_soft: int
    open_files_hard: int
    max_map_count: int | None


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def raise_open_files_limit() -> ProcessLimits:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (capped by ``fs.nr_open`` when the hard
    limit is unlimited); returns the limits now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        target = _read_int(NR_OPEN_PATH) or 1024 * 1024
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as error:
            logger.warning("could not raise the open files limit from %d to %d: %s",
                           soft, target, error)
    return ProcessLimits(soft, hard, _read_int(MAX_MAP_COUNT_PATH))


def current_limits() -> ProcessLimits:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return ProcessLimits(soft, hard, _read_int(MAX_MAP_COUNT_PATH))


def default_open_files_max(limits: ProcessLimits) -> int:
    """``log.segment.open.files.max`` when unset (-1): half of the descriptor limit."""
    if limits.open_files_soft == resource.RLIM_INFINITY:
        return 1024 * 1024
    return max(_MIN_OPEN_FILES, limits.open_files_soft // 2)


def default_index_maps_max(limits: ProcessLimits) -> int:
    """How many indexes stay mapped: half of ``vm.max_map_count`` (the rest is Python's own)."""
    return max(_MIN_OPEN_FILES, (limits.max_map_count or _UNKNOWN_MAX_MAP_COUNT) // 2)


def report_limits(
    limits: ProcessLimits, *, partitions: int, segments: int, open_files_max: int,
    index_maps_max: int,
) -> None:
    """Log the limits next to what the partitions need (Kafka's way: one descriptor per segment
    and two maps per used segment; Samsa's: the caps)."""
    logger.info(
        "open files limit (RLIMIT_NOFILE) %d (hard %d): %d partitions with %d segments; Kafka "
        "would hold %d descriptors, Samsa holds at most %d segment files open "
        "(log.segment.open.files.max) plus one per socket",
        limits.open_files_soft, limits.open_files_hard, partitions, segments, segments,
        open_files_max,
    )
    if open_files_max >= limits.open_files_soft:
        logger.warning(
            "log.segment.open.files.max %d is not below the open files limit %d: raise the "
            "limit (ulimit -n, LimitNOFILE=) or lower the key", open_files_max,
            limits.open_files_soft,
        )
    maps = "unknown" if limits.max_map_count is None else str(limits.max_map_count)
    logger.info(
        "vm.max_map_count %s: %d partitions need %d maps for their active segments' indexes; "
        "at most %d indexes stay mapped", maps, partitions, 2 * partitions, index_maps_max,
    )


def is_resource_limit(error: OSError) -> bool:
    return error.errno in RESOURCE_ERRNOS


def resource_limit_message(error: OSError) -> str:
    """What limit ``error`` hit and what to raise."""
    limits = current_limits()
    if error.errno == errno.EMFILE:
        return (
            f"too many open files: the process limit RLIMIT_NOFILE is {limits.open_files_soft} "
            f"(hard {limits.open_files_hard}); raise it (ulimit -n, systemd LimitNOFILE=) or "
            f"lower log.segment.open.files.max ({error})"
        )
    if error.errno == errno.ENFILE:
        return (
            "too many open files in the system: raise fs.file-max (sysctl -w fs.file-max=...) "
            f"({error})"
        )
    return (
        f"out of memory maps: vm.max_map_count is {limits.max_map_count}; raise it "
        f"(sysctl -w vm.max_map_count=262144) or free memory ({error})"
    )

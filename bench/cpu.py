"""CPU time of a process tree, counted so that work done by threads or children that have
already ended is not lost.

What the kernel keeps, and what each reading therefore includes:

- A process's CPU clock (``clock_gettime`` on ``MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)``,
  the clock ``clock_getcpuclockid(3)`` returns, in nanoseconds) is the scheduler's run time of
  the whole thread group: its live threads *and* the threads that already exited, which the
  kernel folds into the group's ``signal_struct`` when they end. ``/proc/PID/stat`` utime +
  stime (fields 14 and 15) is the same total in clock ticks (10 ms here); it is the fallback.
- Summing ``/proc/PID/task/*/schedstat`` (what the benches did before) sees live threads only:
  a broker with a thread per connection loses each connection's CPU time when it closes.
- A child process that ended counts only once its parent waited for it: then it is in the
  parent's ``cutime`` + ``cstime`` (fields 16 and 17, ticks), its own waited-for descendants
  included. ``tree_cpu_seconds`` adds, for every process of the tree, its own clock and those
  fields, so that a child seen alive in the first reading and reaped by the second is counted
  in both readings, once each way (to within a tick).
- This process's own CPU time: ``time.process_time()`` reads the same thread-group clock, so
  deltas of it include the threads that a client library started and joined meanwhile.

Invariant: readings only grow while the tree's processes live, so the difference of two
readings is the CPU the tree used between them, except for a descendant orphaned by its
parent's exit: init adopts and reaps it, and its time goes to init, outside the tree.
"""

from __future__ import annotations

import os
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_CPUCLOCK_SCHED = 2  # include/linux/posix-timers.h: the run-time clock, not PROF or VIRT


def process_clock_id(pid: int) -> int:
    """The clock id of ``pid``'s process-wide CPU clock (glibc's ``clock_getcpuclockid``)."""
    return ((~pid) << 3) | _CPUCLOCK_SCHED


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid``'s thread group (exited threads included) plus those of the
    children it has waited for; 0.0 if the process is gone."""
    fields = _stat_fields(pid)
    if not fields:
        return 0.0
    children = (int(fields[13]) + int(fields[14])) / CLOCK_TICKS
    try:
        own = time.clock_gettime(process_clock_id(pid))
    except OSError:  # the process ended in between, or a kernel without the clock
        own = (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return own + children


def tree_cpu_seconds(root_pid: int) -> float:
    """CPU seconds used so far by ``root_pid`` and its descendants (see the module docstring)."""
    return sum(process_cpu_seconds(pid) for pid in process_tree(root_pid))


def process_tree(root_pid: int) -> set[int]:
    """``root_pid`` and its live descendants, from each thread's ``children`` file."""
    tree: set[int] = set()
    pending = [root_pid]
    while pending:
        pid = pending.pop()
        if pid not in tree:
            tree.add(pid)
            pending.extend(_children(pid))
    return tree


def _children(pid: int) -> list[int]:
    """Children of every thread of ``pid`` (a child belongs to the thread that forked it)."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/children", "rb") as file:
                found.extend(int(child) for child in file.read().split())
        except OSError:
            continue
    return found


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after ``pid (comm)``: state is [0], ppid [1], utime
    [11], stime [12], cutime [13], cstime [14]."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read().decode(errors="replace")
    except OSError:
        return []
    return text.rsplit(")", 1)[1].split()

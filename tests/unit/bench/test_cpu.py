"""``bench.cpu``: CPU time of a process tree counts threads and children that already ended.

Each test drives a real child process that burns a known amount of CPU in threads (or in a
process of its own) that have ended by the second reading. The threads measure their own burn
(``time.thread_time``), so the expected figure is a lower bound whatever the load."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import cpu

BURN_SECONDS = 0.2
THREADS = 2

BURN = """
import time
def burn():
    end = time.thread_time() + {seconds}
    while time.thread_time() < end:
        pass
"""

# Waits for a command on stdin; "threads": burns in THREADS threads it starts and joins;
# "grandchild": burns in a child process it waits for; "sleeper": starts a child that sleeps.
CHILD = BURN.format(seconds=BURN_SECONDS) + """
import subprocess, sys, threading
print("ready", flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "threads":
        threads = [threading.Thread(target=burn) for _ in range({threads})]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    elif command == "grandchild":
        subprocess.run([sys.executable, "-c", {grandchild!r}], check=True)
    elif command == "sleeper":
        sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(sleeper.pid, flush=True)
    print("done", flush=True)
""".format(threads=THREADS, grandchild=BURN.format(seconds=BURN_SECONDS) + "burn()\n")


class Child:
    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.read() == "ready"

    @property
    def pid(self) -> int:
        return self.process.pid

    def read(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def ask(self, command: str) -> list[str]:
        """Send ``command`` and return what the child printed before ``done``."""
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        lines = []
        while (line := self.read()) != "done":
            assert line, "the child ended"
            lines.append(line)
        return lines


def _await_threads_gone(pid: int) -> None:
    """Until ``pid`` is down to its main thread: ``join()`` returns as a thread's Python code
    ends, a moment before the kernel removes the thread."""
    deadline = time.monotonic() + 10
    while os.listdir(f"/proc/{pid}/task") != [str(pid)]:
        assert time.monotonic() < deadline, "the burning threads did not end"
        time.sleep(0.005)


@pytest.fixture
def child() -> Iterator[Child]:
    started = Child()
    yield started
    for pid in cpu.process_tree(started.pid) - {started.pid}:
        os.kill(pid, 9)
    started.process.kill()
    started.process.wait()


def test_threads_that_ended_are_counted(child: Child) -> None:
    before = cpu.process_cpu_seconds(child.pid)
    child.ask("threads")
    _await_threads_gone(child.pid)
    used = cpu.process_cpu_seconds(child.pid) - before
    assert used >= THREADS * BURN_SECONDS * 0.99
    # What the benches summed before: the live threads' run time, which lost them all.
    tasks = Path(f"/proc/{child.pid}/task")
    live = sum(int((task / "schedstat").read_text().split()[0]) for task in tasks.iterdir()) / 1e9
    assert live < BURN_SECONDS


def test_a_child_that_ended_and_was_waited_for_is_counted(child: Child) -> None:
    before = cpu.tree_cpu_seconds(child.pid)
    child.ask("grandchild")
    assert cpu.process_tree(child.pid) == {child.pid}
    # A reaped child's CPU comes from cutime + cstime, each counted in whole clock ticks.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert cpu.tree_cpu_seconds(child.pid) - before >= BURN_SECONDS * 0.99 - 2 * tick


def test_the_tree_holds_live_descendants_and_their_threads_that_ended(child: Child) -> None:
    sleeper = int(child.ask("sleeper")[0])
    assert cpu.process_tree(child.pid) == {child.pid, sleeper}
    before = cpu.tree_cpu_seconds(child.pid)
    child.ask("threads")
    assert cpu.tree_cpu_seconds(child.pid) - before >= THREADS * BURN_SECONDS * 0.99


def test_a_process_that_is_gone_reads_zero() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpu.process_cpu_seconds(gone.pid) == 0.0


def test_this_process_time_counts_its_joined_threads() -> None:
    """What the client benches read for the client's CPU (``time.process_time``)."""
    def burn() -> None:
        end = time.thread_time() + BURN_SECONDS
        while time.thread_time() < end:
            pass

    before = time.process_time()
    thread = threading.Thread(target=burn)
    thread.start()
    thread.join()
    assert time.process_time() - before >= BURN_SECONDS * 0.99
    assert cpu.process_cpu_seconds(os.getpid()) >= time.process_time() * 0.99

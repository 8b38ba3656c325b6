"""``bench.memory``: a process tree's resident memory, now and at its peak.

A real child process (no socket) allocates and touches a known amount of memory on command;
the readings must see it, in the child's own figure and in the tree's."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from bench import memory

MIB = memory.MIB
GROW_MIB = 64

CHILD = f"""
import sys
held = []
print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "grow":
        held.append(bytearray({GROW_MIB} * 1024 * 1024))  # zero-filled: every page touched
    elif line.strip() == "drop":
        held.clear()
    print("done", flush=True)
"""


@pytest.fixture
def child() -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    yield process
    process.kill()
    process.wait()


def command(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()
    assert process.stdout.readline() == "done\n"


def test_rss_sees_memory_the_child_touches(child: subprocess.Popen[str]) -> None:
    before = memory.process_rss_bytes(child.pid)
    command(child, "grow")
    after = memory.process_rss_bytes(child.pid)
    assert after - before >= GROW_MIB * MIB * 0.9
    assert memory.tree_rss_bytes(child.pid) >= after


def test_tree_rss_includes_children() -> None:
    parent = f"import subprocess, sys; c = subprocess.Popen([sys.executable, '-c', {CHILD!r}], " \
             "stdin=sys.stdin, stdout=sys.stdout); c.wait()"
    process = subprocess.Popen([sys.executable, "-c", parent], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        alone = memory.process_rss_bytes(process.pid)
        command(process, "grow")  # the grandchild grows, the parent does not
        assert memory.tree_rss_bytes(process.pid) - alone >= GROW_MIB * MIB * 0.9
    finally:
        process.kill()
        process.wait()


def test_peak_keeps_the_high_point_after_memory_is_freed(child: subprocess.Popen[str]) -> None:
    with memory.PeakRss(child.pid, interval_s=0.01) as peak:
        command(child, "grow")
        grown = memory.process_rss_bytes(child.pid)
        deadline = time.monotonic() + 10
        while peak.peak_bytes < grown and time.monotonic() < deadline:
            time.sleep(0.01)  # the sampler's next reading: a condition on its own thread
        command(child, "drop")
    assert peak.peak_bytes >= grown
    assert peak.peak_bytes - memory.process_rss_bytes(child.pid) >= GROW_MIB * MIB * 0.9


def test_a_gone_process_reads_zero() -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert memory.process_rss_bytes(process.pid) == 0
    assert memory.tree_rss_bytes(process.pid) == 0
    assert os.getpid() != process.pid

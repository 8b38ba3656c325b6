"""``samsa cluster start`` stops on SIGTERM whatever its main thread is doing: the signal handler
(``ClusterLauncher.request_stop``) takes no lock, so a signal that lands while the main thread
holds one — inside the wait for a node's news — cannot deadlock the launcher.

A Python signal handler runs on the main thread between two bytecodes. The child process below
runs the launcher's ``wait`` once for each bytecode it executes, and runs the handler exactly
there (a trace function, called at every opcode, stands in for the signal's arrival). With the
``threading.Event`` the launcher used before (``Event.set`` in the handler), this hangs at the
opcode inside ``Event.wait`` that holds the Event's lock (the likely cause of a CI run's launcher
outliving a SIGTERM sent right after its start line). The child runs under a timeout, so a deadlock fails the
test instead of hanging the suite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import sys, threading
from pathlib import Path
from tools.cluster_launcher import ClusterLauncher

def run(stop_at):
    '''One wait, the handler run at its ``stop_at``-th opcode; the opcodes it ran.'''
    launcher = ClusterLauncher(Path("no-such-dir"))  # no node: it waits for a stop alone
    opcodes = 0
    def trace(frame, event, arg):
        nonlocal opcodes
        frame.f_trace_opcodes = True
        if event == "opcode":
            opcodes += 1
            if opcodes == stop_at:
                launcher.request_stop()  # what the CLI's SIGTERM handler does
        return trace
    backstop = threading.Timer(0.25, launcher.request_stop)  # once it waits past stop_at
    backstop.start()
    sys.settrace(trace)
    try:
        assert launcher.wait() is None
    finally:
        sys.settrace(None)
    backstop.cancel()
    return opcodes

every = run(stop_at=0)
assert every > 20, every
for stop_at in range(1, every + 1):
    assert run(stop_at) >= stop_at
print("stopped at each of", every, "opcodes")
"""


def test_a_stop_requested_at_any_opcode_of_the_wait_ends_it() -> None:
    result = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("stopped at each of "), result.stdout

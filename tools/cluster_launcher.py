"""``samsa cluster start``: run every node of a config directory as its own broker process.

The directory holds one ``node-<N>.properties`` per node (``conf/cluster/``). Each node is
``python -m tools.cli broker start --config <file>`` (plus the ``--override``s), started in the
current directory (relative ``log.dirs`` resolve there), with its stdout and stderr merged.

- Output: every line a node prints is printed as ``[node-<id>] <line>`` (id = its ``node.id``),
  one whole line at a time; the launcher's own lines start with ``[cluster]``.
- Start: all processes at once; ``start`` returns when every node printed ``Samsa broker
  started on HOST:PORT``, and prints ``[cluster] Samsa cluster started: node 1 on HOST:PORT,
  ...``. A node that exits first fails the start (the others are stopped).
- Run: until ``request_stop`` (SIGINT/SIGTERM in the CLI) or a node exits by itself.
- Stop: (nodes run in sessions of their own, so Ctrl-C reaches the launcher only) SIGTERM to
  each node still running, then wait for each (SIGKILL after
  ``stop_timeout_seconds``). Exit code 0 when every node exited with 0.

Threads: one reader thread per node owns that node's pipe; the calling thread owns the
processes. Readers wake the caller through ``_changed`` (no polling), a ``queue.SimpleQueue``
of wake-ups and not a ``threading.Event``: ``request_stop`` runs in the CLI's signal handler, on
the main thread, which may be inside ``Event.wait`` or ``clear`` holding the Event's lock, and
an Event set there deadlocks the launcher (the likely cause of a CI run's ``samsa cluster start``
outliving a SIGTERM sent right after its start line). ``SimpleQueue.put`` is reentrant.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

__all__ = ["ClusterLauncher", "ClusterStartError", "NodeProcess", "node_configs"]

STARTED = "Samsa broker started on "
_NODE_FILE = re.compile(r"node-(\d+)\.properties")


class ClusterStartError(Exception):
    """The cluster could not be started: which node and why, in one line."""


def node_configs(config_dir: Path) -> list[tuple[int, Path]]:
    """``(node.id, file)`` for each ``node-<N>.properties`` in ``config_dir``, by node id."""
    from broker.config import parse_properties

    found: list[tuple[int, Path]] = []
    for path in sorted(config_dir.glob("node-*.properties")):
        if not _NODE_FILE.fullmatch(path.name):
            continue
        node_id_text = parse_properties(path.read_text(encoding="utf-8")).get("node.id", "")
        if not node_id_text.isdigit():
            raise ClusterStartError(f"{path} sets no node.id")
        found.append((int(node_id_text), path))
    if not found:
        raise ClusterStartError(f"no node-<N>.properties files in {config_dir}")
    return sorted(found)


@dataclass
class NodeProcess:
    node_id: int
    config: Path
    process: subprocess.Popen[str]
    address: str = ""  # HOST:PORT once listening
    listening: bool = False
    output_closed: bool = False
    reader: threading.Thread | None = field(default=None, repr=False)


class ClusterLauncher:
    def __init__(
        self,
        config_dir: Path,
        overrides: Sequence[str] = (),
        *,
        out: TextIO = sys.stdout,
        start_timeout_seconds: float = 60.0,
        stop_timeout_seconds: float = 30.0,
    ) -> None:
        self.config_dir = config_dir
        self.overrides = tuple(overrides)
        self.out = out
        self.start_timeout_seconds = start_timeout_seconds
        self.stop_timeout_seconds = stop_timeout_seconds
        self.nodes: list[NodeProcess] = []
        self._lock = threading.Lock()
        self._changed: queue.SimpleQueue[None] = queue.SimpleQueue()  # wake-ups
        self._stop_requested = False

    # -- start ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start every node and wait until all listen; raise ``ClusterStartError`` (after
        stopping whatever started) when one exits first, the timeout passes or a stop is
        requested."""
        for node_id, config in node_configs(self.config_dir):
            self.nodes.append(self._spawn(node_id, config))
        deadline = time.monotonic() + self.start_timeout_seconds
        while not all(node.listening for node in self.nodes):
            if self._stop_requested:
                self.stop()
                raise ClusterStartError("stopped before every node was listening")
            failed = self.exited_node()
            if failed is not None:
                self.stop()
                raise ClusterStartError(f"node {failed.node_id} exited with code "
                                        f"{failed.process.returncode} before listening")
            if not self._wait_for_change(deadline - time.monotonic()):
                self.stop()
                raise ClusterStartError(f"the nodes did not all listen within "
                                        f"{self.start_timeout_seconds:g} s")
        started = ", ".join(f"node {node.node_id} on {node.address}" for node in self.nodes)
        self.say(f"Samsa cluster started: {started}")

    def _spawn(self, node_id: int, config: Path) -> NodeProcess:
        arguments = [sys.executable, "-m", f"{__package__}.cli", "broker", "start", "--config",
                     str(config)]
        for override in self.overrides:
            arguments += ["--override", override]
        # A session of its own: Ctrl-C in the terminal reaches the launcher only, which then
        # stops every node itself (one SIGTERM each), so no node sees two signals or looks as
        # if it had exited by itself.
        process = subprocess.Popen(
            arguments, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
            env=_unbuffered_environment(), start_new_session=True,
        )
        node = NodeProcess(node_id, config, process)
        self.say(f"node {node_id}: pid {process.pid}, config {config}")
        node.reader = threading.Thread(target=self._read, args=(node,), daemon=True,
                                       name=f"node-{node_id}-output")
        node.reader.start()
        return node

    def _read(self, node: NodeProcess) -> None:
        """A reader thread: prefix and print each line, note when the node listens."""
        assert node.process.stdout is not None
        for line in node.process.stdout:
            text = line.rstrip("\n")
            if text.startswith(STARTED) and not node.listening:
                node.address = text[len(STARTED):].strip()
                node.listening = True
                self._changed.put(None)
            self._print(f"[node-{node.node_id}] {text}")
        node.process.wait()
        node.output_closed = True
        self._changed.put(None)

    def _wait_for_change(self, timeout: float | None) -> bool:
        if timeout is not None and timeout <= 0:
            return False
        try:
            self._changed.get(timeout=timeout)
        except queue.Empty:
            return False
        while not self._changed.empty():  # one look covers every wake-up so far
            self._changed.get_nowait()
        return True

    # -- run and stop -----------------------------------------------------------------------

    def exited_node(self) -> NodeProcess | None:
        """A node whose process ended (its output read to the end), if any."""
        return next((node for node in self.nodes if node.output_closed), None)

    def wait(self) -> NodeProcess | None:
        """Run until a stop is requested (returns None) or a node exits (returns it)."""
        while not self._stop_requested:
            exited = self.exited_node()
            if exited is not None:
                return exited
            self._wait_for_change(None)
        return None

    def request_stop(self) -> None:
        """Make ``start`` or ``wait`` return. Safe in a signal handler, even one that
        interrupts itself: a plain assignment and a reentrant ``SimpleQueue.put``, no lock."""
        self._stop_requested = True
        self._changed.put(None)

    def stop(self) -> dict[int, int]:
        """SIGTERM each running node, then wait for each; their exit codes by node id."""
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        codes: dict[int, int] = {}
        for node in self.nodes:
            try:
                codes[node.node_id] = node.process.wait(self.stop_timeout_seconds)
            except subprocess.TimeoutExpired:
                self.say(f"node {node.node_id} did not stop within "
                         f"{self.stop_timeout_seconds:g} s: killing it")
                node.process.kill()
                codes[node.node_id] = node.process.wait()
            if node.reader is not None:
                node.reader.join()
        return codes

    # -- output -----------------------------------------------------------------------------

    def say(self, message: str) -> None:
        self._print(f"[cluster] {message}")

    def _print(self, line: str) -> None:
        with self._lock:  # whole lines only: nodes never interleave within a line
            self.out.write(line + "\n")
            self.out.flush()


def _unbuffered_environment() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}

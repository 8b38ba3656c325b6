"""``samsa cluster start``: three real broker processes from a generated config directory.

This checks the launcher, not the cluster the nodes form: every node starts and listens, output
is prefixed per node, SIGTERM stops them all (exit 0), and a node that dies takes the launcher
(and the other nodes) down with exit code 1.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat.samsa_cluster import free_ports

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 60


CONTROLLER_PORTS: dict[Path, list[int]] = {}


def write_config_dir(tmp_path: Path) -> Path:
    config_dir = tmp_path / "cluster"
    config_dir.mkdir()
    controller_ports = free_ports(3)
    voters = ",".join(f"{n}@127.0.0.1:{port}" for n, port in enumerate(controller_ports, 1))
    for node_id, port in enumerate(controller_ports, 1):
        listeners = ["PLAINTEXT://127.0.0.1:0", f"CONTROLLER://127.0.0.1:{port}"]
        if node_id == 2:  # the start line names the client listener, whatever the order
            listeners.reverse()
        (config_dir / f"node-{node_id}.properties").write_text(
            "process.roles=broker,controller\n"
            f"node.id={node_id}\n"
            f"controller.quorum.voters={voters}\n"
            "controller.listener.names=CONTROLLER\n"
            f"listeners={','.join(listeners)}\n"
            f"log.dirs={tmp_path / f'node-{node_id}'}\n"
            f"broker.rack=rack-{node_id}\n"
            "group.initial.rebalance.delay.ms=0\n"
        )
    (config_dir / "README").write_text("not a node\n")
    CONTROLLER_PORTS[config_dir] = controller_ports
    return config_dir


class Launcher:
    """The launcher process; a thread collects its output and signals awaited lines."""

    def __init__(self, config_dir: Path) -> None:
        self.config_dir = config_dir
        self.lines: list[str] = []
        self._condition = threading.Condition()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tools.cli", "cluster", "start", "--config-dir",
             str(config_dir)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._condition:
                self.lines.append(line.rstrip("\n"))
                self._condition.notify_all()
        with self._condition:
            self.lines.append("<eof>")
            self._condition.notify_all()

    def await_line(self, fragment: str) -> str:
        def found() -> str | None:
            return next((line for line in self.lines if fragment in line or line == "<eof>"), None)

        with self._condition:
            assert self._condition.wait_for(found, TIMEOUT_SECONDS), self.output()
            line = found()
        assert line is not None and line != "<eof>", f"{fragment!r} never came:\n{self.output()}"
        return line

    def node_pids(self) -> dict[int, int]:
        pids = {}
        for line in self.lines:
            if line.startswith("[cluster] node ") and ": pid " in line:
                node, rest = line[len("[cluster] node "):].split(": pid ")
                pids[int(node)] = int(rest.split(",")[0])
        return pids

    def finish(self) -> int:
        try:
            code = self.process.wait(TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the launcher still runs after {TIMEOUT_SECONDS} s:\n{self.output()}")
        self._reader.join(TIMEOUT_SECONDS)
        return code

    def output(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    started = Launcher(write_config_dir(tmp_path))
    yield started
    if started.process.poll() is None:  # a failed test: the launcher never reaped its nodes,
        started.process.kill()  # so their pids are still theirs; never leave a broker behind
        started.process.wait()
        for pid in started.node_pids().values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def assert_gone(pid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_starts_every_node_and_stops_them_all_on_sigterm(launcher: Launcher) -> None:
    started = launcher.await_line("[cluster] Samsa cluster started: ")
    assert [f"node {n} on 127.0.0.1:" in started for n in (1, 2, 3)] == [True] * 3
    addresses = started.split(": ", 1)[1].split(", ")
    client_ports = {int(address.rsplit(":", 1)[1]) for address in addresses}
    assert not client_ports & set(CONTROLLER_PORTS[launcher.config_dir])
    for node_id in (1, 2, 3):
        assert any(line.startswith(f"[node-{node_id}] Samsa broker started on 127.0.0.1:")
                   for line in launcher.lines), launcher.output()
    pids = launcher.node_pids()
    assert sorted(pids) == [1, 2, 3]
    for line in launcher.lines:  # every line is the launcher's or a node's
        assert line.startswith(("[cluster] ", "[node-1] ", "[node-2] ", "[node-3] ")), line
    launcher.process.send_signal(signal.SIGTERM)
    assert launcher.finish() == 0, launcher.output()
    assert ("[cluster] stopped: node 1 exit code 0, node 2 exit code 0, node 3 exit code 0"
            in launcher.lines)
    for node_id in (1, 2, 3):
        assert f"[node-{node_id}] " in "\n".join(
            line for line in launcher.lines if "shut down cleanly" in line)
    for pid in pids.values():
        assert_gone(pid)


def test_a_node_that_dies_stops_the_cluster(launcher: Launcher) -> None:
    launcher.await_line("[cluster] Samsa cluster started: ")
    pids = launcher.node_pids()
    os.kill(pids[2], signal.SIGKILL)
    assert launcher.finish() == 1, launcher.output()
    assert f"[cluster] node 2 exited with code {-signal.SIGKILL}: stopping the cluster" in (
        launcher.lines)
    for pid in pids.values():
        assert_gone(pid)


def test_a_node_that_cannot_start_stops_the_others(tmp_path: Path) -> None:
    config_dir = write_config_dir(tmp_path)
    bad = config_dir / "node-3.properties"
    bad.write_text(bad.read_text() + "controller.quorum.election.timeout.ms=0\n")
    launcher = Launcher(config_dir)
    assert launcher.finish() == 1, launcher.output()
    assert "[cluster] not started: node 3 exited with code 1 before listening" in launcher.lines
    assert any(line.startswith("[node-3] samsa: error: invalid value '0' for configuration "
                               "controller.quorum.election.timeout.ms") for line in launcher.lines)
    for pid in launcher.node_pids().values():
        assert_gone(pid)

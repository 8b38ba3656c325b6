"""A real broker process per test: ``python -m tools.cli broker start`` on an ephemeral port.

The fixture reads the process's stdout for the ``Samsa broker started on HOST:PORT`` line (no
sleeps), sends its stderr (the broker's log) to a file in the test's temp dir, and at the end
stops it with SIGTERM and asserts exit code 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STARTED = "Samsa broker started on "
START_TIMEOUT_SECONDS = 30
STOP_TIMEOUT_SECONDS = 30


def stack_dump(pid: int) -> str:
    """Every thread's Python stack in process ``pid`` (``py-spy dump``, a dev dependency), for a
    broker that hangs; the reason instead when it cannot be taken (py-spy missing, ptrace not
    permitted)."""
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        return "py-spy is not installed: no stacks"
    try:
        taken = subprocess.run([str(spy), "dump", "--pid", str(pid)], capture_output=True,
                               text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"py-spy dump failed: {error}"
    return taken.stdout + taken.stderr


@dataclass
class BrokerProcess:
    log_dir: Path
    overrides: dict[str, str]
    stderr_path: Path
    process: subprocess.Popen[str] | None = None
    host: str = ""
    port: int = 0
    _stderr: object = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> BrokerProcess:
        arguments = [sys.executable, "-m", "tools.cli", "broker", "start"]
        settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(self.log_dir),
                    **self.overrides}
        for key, value in settings.items():
            arguments += ["--override", f"{key}={value}"]
        self._stderr = open(self.stderr_path, "a")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            arguments, cwd=ROOT, stdout=subprocess.PIPE, stderr=self._stderr, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # blocks until the line or the process's end
        if not line.startswith(STARTED):
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"broker did not start: {line!r}\n{self.log()}")
        self.host, port = line[len(STARTED):].strip().rsplit(":", 1)
        self.port = int(port)
        return self

    def stop(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            stacks = self.stderr_path.with_suffix(".stacks.txt")
            stacks.write_text(stack_dump(self.process.pid))
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the broker did not stop in {STOP_TIMEOUT_SECONDS} s after "
                                 f"SIGTERM; its threads' stacks then: {stacks}") from None
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()
            self._stderr.close()  # type: ignore[attr-defined]
        return code

    def kill(self) -> None:
        """kill -9 (the files stay as a crash leaves them); ``start`` then uses the same port."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._stderr.close()  # type: ignore[attr-defined]
        self.overrides = {**self.overrides, "listeners": f"PLAINTEXT://127.0.0.1:{self.port}"}

    def restart(self) -> BrokerProcess:
        assert self.stop() == 0, self.log()
        self.overrides = {**self.overrides, "listeners": f"PLAINTEXT://127.0.0.1:{self.port}"}
        return self.start()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[object]:
    """A factory: ``start_broker(**overrides)`` starts a broker (stopped at the end)."""
    started: list[BrokerProcess] = []

    def start(**overrides: str) -> BrokerProcess:
        index = len(started)
        broker = BrokerProcess(
            log_dir=tmp_path / f"logs-{index}",
            overrides={key.replace("_", "."): value for key, value in overrides.items()},
            stderr_path=tmp_path / f"broker-{index}.log",
        )
        started.append(broker.start())
        return broker

    yield start
    for broker in started:
        if broker.alive():
            code = broker.stop()
            assert code == 0, f"broker exited with {code}\n{broker.log()}"


@pytest.fixture
def broker(start_broker) -> BrokerProcess:  # type: ignore[no-untyped-def]
    return start_broker()


# Multi-node KRaft clusters (``cluster_nodes`` fixture); imported last: it builds on BrokerProcess.
from tests.integration.cluster_nodes import cluster_nodes  # noqa: E402, F401

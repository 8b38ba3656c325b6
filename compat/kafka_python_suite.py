"""kafka-python's own integration tests (``test/integration`` of its sdist) against Samsa.

The sdist is fetched with pip into ``.cache/compat/`` and unpacked once. It lacks
``test/__init__.py`` and ``test/service.py``; small stand-ins from ``compat/kafka_python/``
are copied in. The suite runs in Samsa's ``.venv`` (which pins the same kafka-python) with
``KAFKA_URI`` pointing at the broker, so its fixtures wrap the running broker instead of
spawning a JVM, and ``KAFKA_VERSION`` set to the version kafka-python infers from Samsa's
ApiVersions. Outcomes come from pytest's JUnit XML; each failure gets a category.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from compat.results import Outcome, SuiteResult
from compat.samsa_broker import AUTHORIZER, ROOT, SamsaBroker

VERSION = "3.0.12"
KAFKA_VERSION = "4.0.0"  # what kafka-python 3.0.12 infers from Samsa's ApiVersions: (4, 0)
HERE = Path(__file__).resolve().parent
PER_TEST_TIMEOUT_SECONDS = 120
SUITE_TIMEOUT_SECONDS = 20 * 60
MISSING_API = re.compile(r"does not support the '(\w+?)(?:Request)?' Kafka protocol")
GROUP_SYMPTOMS = ("stable group", "FindCoordinator", "GroupCoordinator", "CoordinatorNotAvailable")


def prepare(cache: Path) -> Path:
    """The unpacked sdist with the stand-ins copied in; downloads only the first time."""
    source = cache / f"kafka_python-{VERSION}"
    if not (source / "test" / "integration").is_dir():
        archive = cache / f"kafka_python-{VERSION}.tar.gz"
        if not archive.exists():
            subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                            "--no-binary", ":all:", f"kafka-python=={VERSION}", "-d", str(cache)],
                           check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(cache, filter="data")
    shutil.copyfile(HERE / "kafka_python" / "service.py", source / "test" / "service.py")
    shutil.copyfile(HERE / "kafka_python" / "package_init.py", source / "test" / "__init__.py")
    return source


def run(cache: Path, results: Path) -> SuiteResult:
    source = prepare(cache)
    junit = results / "kafka-python.junit.xml"
    junit.unlink(missing_ok=True)
    broker = SamsaBroker(results / "logs" / "kafka-python-broker.log", _fixture_settings()).start()
    started = time.monotonic()
    try:
        completed = _pytest(source, broker, junit, results / "logs" / "kafka-python-pytest.log")
    finally:
        exit_code = broker.stop()
    outcomes = [_categorise(outcome) for outcome in _read_junit(junit)]
    notes = [f"pytest exited {completed}", f"broker exited {exit_code}"]
    return SuiteResult("kafka-python", VERSION, time.monotonic() - started, outcomes, notes)


def _fixture_settings() -> dict[str, str]:
    """The settings of the broker kafka-python's fixtures would start (servers/*/kafka.properties).

    Its tests assume node id 0 (``create_partitions`` assigns replicas to broker 0) and an
    explicitly configured ``advertised.listeners`` (checked as STATIC_BROKER_CONFIG), which needs
    the port up front: a free one is picked and handed over. Its group tests use
    ``session_timeout_ms=3000``, below Kafka's default ``group.min.session.timeout.ms`` (6000),
    so — like any test broker for them — the minimum is lowered, and the initial rebalance delay
    is 0 (both brokers would answer INVALID_SESSION_TIMEOUT otherwise, as Samsa did). ACLs
    are enforced as on a Kafka test cluster (``AUTHORIZER``: StandardAuthorizer, everything
    allowed where no ACL is found), for its ACL admin test.
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    return {"node.id": "0", "listeners": listener, "advertised.listeners": listener,
            "group.min.session.timeout.ms": "1000", "group.initial.rebalance.delay.ms": "0",
            **AUTHORIZER}


def _pytest(source: Path, broker: SamsaBroker, junit: Path, log_path: Path) -> int:
    kafka_root = source / ".no-kafka-install"  # the fixtures insist that KAFKA_ROOT exists
    kafka_root.mkdir(exist_ok=True)
    environment = {
        **os.environ,
        "KAFKA_URI": f"PLAINTEXT://{broker.bootstrap}",
        "KAFKA_VERSION": KAFKA_VERSION,
        "KAFKA_ROOT": str(kafka_root),
        "PYTHONPATH": str(HERE / "kafka_python"),  # for -p samsa_skips
    }
    command = [str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest", "test/integration",
               "-p", "no:cacheprovider", "-p", "samsa_skips", "-q", "-rN", "--tb=short",
               f"--timeout={PER_TEST_TIMEOUT_SECONDS}", "-o", "log_level=WARNING",
               f"--junitxml={junit}"]
    with open(log_path, "w") as log:
        try:
            return subprocess.run(command, cwd=source, env=environment, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=SUITE_TIMEOUT_SECONDS).returncode
        except subprocess.TimeoutExpired:
            return -1


def _read_junit(path: Path) -> list[Outcome]:
    """One outcome per test; a test that failed in call or teardown stays failed."""
    if not path.exists():
        return []
    outcomes: dict[str, Outcome] = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        status, reason = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                status, reason = "failed", child.get("message") or child.text or ""
            elif child.tag == "skipped":
                status, reason = "skipped", child.get("message") or ""
        if name not in outcomes or outcomes[name].status != "failed":
            outcomes[name] = Outcome(name, status, float(case.get("time", 0)),
                                     reason.strip()[:500])
    return list(outcomes.values())


def _categorise(outcome: Outcome) -> Outcome:
    if outcome.status != "failed":
        return outcome
    match = MISSING_API.search(outcome.reason)
    if "transactional" in outcome.name:
        outcome.category = "missing API: transactions (FindCoordinator/AddPartitionsToTxn/EndTxn)"
    elif match and match.group(1) in ("FindCoordinator", "JoinGroup", "OffsetFetch", "OffsetCommit"):
        outcome.category = "missing API: consumer groups (FindCoordinator/JoinGroup/...)"
    elif match:
        outcome.category = f"missing API: {match.group(1)}"
    elif any(symptom in outcome.reason for symptom in GROUP_SYMPTOMS):
        outcome.category = "missing API: consumer groups (FindCoordinator/JoinGroup/...)"
    else:
        outcome.category = "unexplained: possible Samsa bug"
    return outcome

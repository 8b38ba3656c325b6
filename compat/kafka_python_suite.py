"""kafka-python's own integration tests (``test/integration`` of its sdist) against Samsa.

The sdist is fetched with pip into ``.cache/compat/`` and unpacked once. It lacks
``test/__init__.py``, ``test/service.py`` and the broker templates of ``servers/resources/``;
stand-ins from ``compat/kafka_python/`` are copied in. The suite runs in Samsa's ``.venv``
(which pins the same kafka-python), with ``KAFKA_VERSION`` set to the version kafka-python infers
from Samsa's ApiVersions, in two pytest invocations:

- everything but ``test_sasl_integration.py``, with ``KAFKA_URI`` pointing at one Samsa broker
  (``_fixture_settings``), so its fixtures wrap that broker instead of spawning a JVM;
- ``test_sasl_integration.py`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), which skips itself when
  ``KAFKA_URI`` is set: without it, its ``KafkaFixture`` starts a broker per test with a
  SASL_PLAINTEXT listener, through the stand-ins (``compat/kafka_python/service.py`` starts a
  Samsa broker; ``$KAFKA_ROOT/bin`` holds compat's kafka-storage.sh and kafka-topics.sh).

Outcomes come from pytest's JUnit XML files; each failure gets a category.
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

from compat.kafka_home import kafka_home
from compat.results import Outcome, SuiteResult
from compat.samsa_broker import AUTHORIZER, ROOT, SamsaBroker

VERSION = "3.0.12"
KAFKA_VERSION = "4.0.0"  # what kafka-python 3.0.12 infers from Samsa's ApiVersions: (4, 0)
HERE = Path(__file__).resolve().parent
PER_TEST_TIMEOUT_SECONDS = 120
SUITE_TIMEOUT_SECONDS = 20 * 60
MISSING_API = re.compile(r"does not support the '(\w+?)(?:Request)?' Kafka protocol")
SASL_MODULE = "test/integration/test_sasl_integration.py"
TEMPLATES = ("kafka.properties", "kafka_server_jaas.conf", "sasl_command.conf")
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
    resources = source / "servers" / "resources" / "default"  # Fixture.test_resource() looks here
    resources.mkdir(parents=True, exist_ok=True)
    for template in TEMPLATES:
        shutil.copyfile(HERE / "kafka_python" / "resources" / template, resources / template)
    return source


def run(cache: Path, results: Path) -> SuiteResult:
    source = prepare(cache)
    home = kafka_home(cache)
    logs = results / "logs"
    junit, sasl_junit = results / "kafka-python.junit.xml", results / "kafka-python-sasl.junit.xml"
    broker = SamsaBroker(logs / "kafka-python-broker.log", _fixture_settings()).start()
    started = time.monotonic()
    try:
        completed = _pytest(source, ["test/integration", f"--ignore={SASL_MODULE}"], junit,
                            logs / "kafka-python-pytest.log",
                            {"KAFKA_URI": f"PLAINTEXT://{broker.bootstrap}",
                             "KAFKA_ROOT": str(home)})
    finally:
        exit_code = broker.stop()
    sasl_log = logs / "kafka-python-sasl-brokers.log"
    sasl_log.unlink(missing_ok=True)
    sasl_completed = _pytest(source, [SASL_MODULE], sasl_junit,
                             logs / "kafka-python-sasl-pytest.log",
                             {"KAFKA_ROOT": str(home), "SAMSA_COMPAT_BROKER_LOG": str(sasl_log)})
    outcomes = [_categorise(outcome) for outcome in _read_junit(junit) + _read_junit(sasl_junit)]
    notes = [f"pytest exited {completed}", f"broker exited {exit_code}",
             f"SASL pytest ({SASL_MODULE}, a Samsa broker per test) exited {sasl_completed}"]
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


def _pytest(source: Path, selection: list[str], junit: Path, log_path: Path,
            settings: dict[str, str]) -> int:
    """Run pytest on ``selection`` in the sdist with ``settings`` added to the environment
    (``KAFKA_URI`` only where the fixtures should wrap a running broker)."""
    junit.unlink(missing_ok=True)
    environment = {key: value for key, value in os.environ.items() if key != "KAFKA_URI"}
    environment.update({
        "KAFKA_VERSION": KAFKA_VERSION,
        # -p samsa_skips; and compat itself, which test/service.py imports
        "PYTHONPATH": os.pathsep.join([str(HERE / "kafka_python"), str(ROOT)]),
        **settings,
    })
    command = [str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest", *selection,
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

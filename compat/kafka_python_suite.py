"""kafka-python's own integration tests (``test/integration`` of its sdist) against Samsa.

The sdist is fetched with pip into ``.cache/compat/`` and unpacked once. It lacks
``test/__init__.py``, ``test/service.py`` and the broker templates of ``servers/resources/``;
stand-ins from ``compat/kafka_python/`` are copied in. The suite runs in Samsa's ``.venv``
(which pins the same kafka-python), with ``KAFKA_VERSION`` set to the version kafka-python infers
from Samsa's ApiVersions, in two pytest invocations:

- everything but ``test_sasl_integration.py``, with ``KAFKA_URI`` pointing at one Samsa broker
  (``_fixture_settings``), so its fixtures wrap that broker instead of spawning a JVM — except
  ``test_ssl_integration.py``'s module fixture, which starts a broker with an SSL listener
  itself, through the stand-ins (its Java key stores converted to PEM; its log goes to
  ``logs/<suite>-ssl-brokers.log``);
- ``test_sasl_integration.py`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), which skips itself when
  ``KAFKA_URI`` is set: without it, its ``KafkaFixture`` starts a broker per test with a
  SASL_PLAINTEXT listener, through the stand-ins (``compat/kafka_python/service.py`` starts a
  Samsa broker; ``$KAFKA_ROOT/bin`` holds compat's kafka-storage.sh and kafka-topics.sh).

The entries of ``compat/skips.py`` that apply on this run are handed to the ``samsa_skips``
plugin (``SAMSA_COMPAT_SKIPS``, a JSON file), which skips those tests. Outcomes come from
pytest's JUnit XML files. The run fails on a failed or errored test, a skip the table does not
tolerate now, a missing JUnit file, a pytest exit code that its outcomes do not explain, a
timeout, and a broker that died or did not stop cleanly (``SuiteResult.failures``).
``selection``: pytest node ids under ``test/integration`` (for the harness's own tests); the
SASL pass runs only if one of them is in its module.
``brokers`` 3 (``--brokers 3``): the main pass runs against a cluster of three Samsa nodes with
node ids 0-2 (``compat.samsa_cluster``); ``KAFKA_URI`` names node 0 — kafka-python's fixture
parses one address, and its clients find the others through Metadata; results go to
``kafka-python-cluster.json``. The SASL pass still starts one broker per test: that is its
fixture's own design.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from compat import skips
from compat.fault_proxy import Fault
from compat.kafka_home import kafka_home
from compat.results import Outcome, SuiteResult, exit_problem, judge_skips, unmatched_entries
from compat.samsa_broker import AUTHORIZER, ROOT
from compat.samsa_cluster import start_brokers

VERSION = "3.0.12"
HERE = Path(__file__).resolve().parent
PER_TEST_TIMEOUT_SECONDS = 120
SUITE_TIMEOUT_SECONDS = 20 * 60
INTEGRATION = "test/integration"
SASL_MODULE = f"{INTEGRATION}/test_sasl_integration.py"
TEMPLATES = ("kafka.properties", "kafka_server_jaas.conf", "sasl_command.conf")
# pytest's exit codes: 1 is "some tests failed", explained by the failed outcomes it reports.
TESTS_FAILED = 1


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


def run(cache: Path, results: Path, *, selection: list[str] | None = None,
        faults: tuple[Fault, ...] = (), brokers: int = 1) -> SuiteResult:
    source = prepare(cache)
    suite = "kafka-python" if brokers == 1 else "kafka-python-cluster"
    logs = results / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    broker = start_brokers(logs, f"{suite}-broker", _fixture_settings(brokers), brokers=brokers,
                           faults=faults)
    started = time.monotonic()
    outcomes: list[Outcome] = []
    problems: list[str] = []
    main, sasl = _split(selection)
    try:
        facts = broker.facts()
        tolerated = skips.applicable(skips.KAFKA_PYTHON, facts)
        skips_file = results / f"{suite}-skips.json"
        skips_file.write_text(json.dumps(tolerated, indent=2) + "\n")
        settings = {"KAFKA_ROOT": str(kafka_home(cache)), "SAMSA_COMPAT_SKIPS": str(skips_file),
                    "KAFKA_VERSION": ".".join(map(str, facts.kafka_version))}
        if main:  # its fixture takes one broker: node 0 of a cluster (the others: Metadata)
            spawned_log = logs / f"{suite}-ssl-brokers.log"  # test_ssl_integration's fixture
            spawned_log.unlink(missing_ok=True)
            outcomes, problems = _pass(source, suite, main, results, {
                **settings, "KAFKA_URI": f"PLAINTEXT://{broker.bootstrap.split(',')[0]}",
                "SAMSA_COMPAT_BROKER_LOG": str(spawned_log)})
        if not broker.alive():
            problems.append("the Samsa broker died during the run")
    finally:
        problems += exit_problem("the Samsa broker", broker.stop())
    if sasl:
        sasl_log = logs / f"{suite}-sasl-brokers.log"
        sasl_log.unlink(missing_ok=True)
        found, trouble = _pass(source, f"{suite}-sasl", sasl, results,
                               {**settings, "SAMSA_COMPAT_BROKER_LOG": str(sasl_log)})
        outcomes, problems = outcomes + found, problems + trouble
    judge_skips(outcomes, tolerated)
    if selection is None:
        problems += unmatched_entries(skips.entries(skips.KAFKA_PYTHON), outcomes)
    notes = [f"KAFKA_VERSION={settings['KAFKA_VERSION']} (inferred from the broker's ApiVersions)",
             f"main pass: {brokers} broker(s), KAFKA_URI the first of {broker.bootstrap}",
             f"SASL pass ({SASL_MODULE}, a Samsa broker per test): {'run' if sasl else 'not run'}"]
    return SuiteResult(suite, VERSION, time.monotonic() - started, outcomes, problems,
                       notes)


def _split(selection: list[str] | None) -> tuple[list[str], list[str]]:
    """pytest arguments of the main pass and of the SASL pass (empty: the pass does not run)."""
    if selection is None:
        return [INTEGRATION, f"--ignore={SASL_MODULE}"], [SASL_MODULE]
    nodes = [f"{INTEGRATION}/{node}" for node in selection]
    return ([node for node in nodes if not node.startswith(SASL_MODULE)],
            [node for node in nodes if node.startswith(SASL_MODULE)])


def _pass(source: Path, name: str, arguments: list[str], results: Path,
          settings: dict[str, str]) -> tuple[list[Outcome], list[str]]:
    """One pytest invocation (its JUnit file and log named ``name``): its outcomes and the
    problems around them."""
    junit = results / f"{name}.junit.xml"
    code = _pytest(source, arguments, junit, results / "logs" / f"{name}-pytest.log", settings)
    return judge_pytest(f"pytest ({name})", code, junit)


def judge_pytest(what: str, code: int | None, junit: Path) -> tuple[list[Outcome], list[str]]:
    """The outcomes in ``junit`` and the problems around them: a timeout (``code`` None), no
    or an unreadable JUnit file, an exit code the outcomes do not explain (only 1, "tests
    failed", with a failed test among them is explained, besides 0)."""
    if code is None:  # killed: pytest writes its JUnit file only at the end
        return [], [f"{what} timed out after {SUITE_TIMEOUT_SECONDS}s"]
    if not junit.exists():
        return [], [f"{what} exited {code} and wrote no JUnit file"]
    try:
        outcomes = _read_junit(junit)
    except ElementTree.ParseError as error:
        return [], [f"{what} exited {code} and its JUnit file is unreadable: {error}"]
    explained = code == 0 or (code == TESTS_FAILED and any(
        outcome.status == "failed" for outcome in outcomes))
    return outcomes, [] if explained else [f"{what} exited {code}"]


def _fixture_settings(brokers: int = 1) -> dict[str, str]:
    """The settings of the broker kafka-python's fixtures would start (servers/*/kafka.properties).

    Its tests assume node id 0 (``create_partitions`` assigns replicas to broker 0) and an
    explicitly configured ``advertised.listeners`` (checked as STATIC_BROKER_CONFIG), which needs
    the port up front: a free one is picked and handed over. Its group tests use
    ``session_timeout_ms=3000``, below Kafka's default ``group.min.session.timeout.ms`` (6000),
    so — like any test broker for them — the minimum is lowered, and the initial rebalance delay
    is 0 (both brokers would answer INVALID_SESSION_TIMEOUT otherwise, as Samsa did). ACLs
    are enforced as on a Kafka test cluster (``AUTHORIZER``: StandardAuthorizer, everything
    allowed where no ACL is found), for its ACL admin test. A cluster (``brokers`` > 1,
    ``compat.samsa_cluster``) sets node ids 0, 1, ... and each node's listeners itself.
    """
    groups = {"group.min.session.timeout.ms": "1000", "group.initial.rebalance.delay.ms": "0",
              **AUTHORIZER}
    if brokers > 1:
        return groups
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    listener = f"PLAINTEXT://127.0.0.1:{port}"
    return {"node.id": "0", "listeners": listener, "advertised.listeners": listener, **groups}


def _pytest(source: Path, selection: list[str], junit: Path, log_path: Path,
            settings: dict[str, str]) -> int | None:
    """Run pytest on ``selection`` in the sdist with ``settings`` added to the environment
    (``KAFKA_URI`` only where the fixtures should wrap a running broker); its exit code, or
    None if it ran out of time."""
    junit.unlink(missing_ok=True)
    environment = {key: value for key, value in os.environ.items() if key != "KAFKA_URI"}
    environment.update({
        # -p samsa_skips; and compat itself, which test/service.py imports
        "PYTHONPATH": os.pathsep.join([str(HERE / "kafka_python"), str(ROOT)]),
        **settings,
    })
    command = [str(ROOT / ".venv" / "bin" / "python"), "-m", "pytest", *selection,
               "-p", "no:cacheprovider", "-p", "samsa_skips", "-q", "-rN", "--tb=short",
               f"--timeout={PER_TEST_TIMEOUT_SECONDS}", "--timeout-method=signal",
               "-o", "log_level=WARNING",
               f"--junitxml={junit}"]
    with open(log_path, "w") as log:
        try:
            return subprocess.run(command, cwd=source, env=environment, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=SUITE_TIMEOUT_SECONDS).returncode
        except subprocess.TimeoutExpired:
            return None


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

"""librdkafka's C/C++ test suite (``tests/`` of the copy node-rdkafka bundles) against Samsa.

Fetched with ``npm pack node-rdkafka@VERSION`` into ``.cache/compat/`` and built once:
``./configure --no-download --disable-gssapi --disable-curl``, ``make libs``,
``make -C tests build`` (Debian build dependencies, rapidjson-dev included, are apt-installed
first if missing; a build configured without RapidJSON is reconfigured and rebuilt once).
librdkafka's test cluster has 3 brokers and some tests (0098, 0101, 0103) create their
topics with replication factor 3, which one node must refuse (Kafka's too): before the build,
those calls are patched to replication factor 1 (``patch_for_one_node``), nothing else.
Tests that shell out to Kafka's Java tools get stand-ins on ``KAFKA_PATH`` (``compat.kafka_home``:
kafka-topics.sh and kafka-acls.sh); those calling another tool, or a Java program of their
own (``NEEDS_JAVA``), are skipped. The broker enforces ACLs (``AUTHORIZER``) and, like Kafka's
shipped development ``server.properties``, has ``group.initial.rebalance.delay.ms=0``, so a
consumer group's first join is not held back 3 s (``BROKER_SETTINGS``).

The test numbers in ``NEEDS_INITIAL_REBALANCE_DELAY`` (0118) assume Kafka's default delay, which
librdkafka's CI brokers keep: they run in a pass of their own, against a broker that keeps it.

SASL: the test numbers in ``SASL_TESTS`` skip themselves unless ``test.conf`` sets
``security.protocol=SASL_PLAINTEXT`` with a PLAIN or SCRAM ``sasl.mechanism``. They run in a
pass of their own, against a broker with a PLAINTEXT and a SASL_PLAINTEXT listener, set up as
librdkafka's own CI sets its SASL cluster up (trivup, ``tests/sasl_test.py`` and
``interactive_broker_version.py``): SCRAM-SHA-512, one user ``testuser``/``testpass`` (created
through the PLAINTEXT listener with AlterUserScramCredentials) and
``connections.max.reauth.ms=10000``; their ``test.conf`` points at the SASL listener with those
credentials. 0126 (OAUTHBEARER/OIDC) and 0097 (SSL) are not among them: Samsa serves neither.

Each test number runs in its own ``test-runner`` process (``TESTS=NNNN``, flags
``-Q -E -K -L``: quick mode — except for ``NOT_QUICK`` —, no socket-emulation, no known-issue and
no broker-less tests), so
one hang or crash costs one test, under a wall-clock timeout and an overall time budget.
A ``test.conf`` of the run's own (``RDKAFKA_TEST_CONF``, so that runs at the same time do not
share one) points ``bootstrap.servers`` at the broker; ``TEST_KAFKA_VERSION`` is the Kafka
version Samsa's ApiVersions matches. A test number whose source calls for an API (``REQUIREMENTS``:
subscribe/commit need the group APIs, transactions need the transaction APIs, ...) is skipped
while the broker does not advertise one of those API keys, and runs by itself once it does
(``--all`` runs everything regardless). Outcomes are read from the runner's summary table.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from compat.kafka_home import STAND_INS, kafka_home
from compat.results import Outcome, SuiteResult
from compat.samsa_broker import AUTHORIZER, SamsaBroker, ScramUser, create_scram_users

NODE_RDKAFKA_VERSION = "3.6.1"  # bundles librdkafka 2.12.0
TEST_KAFKA_VERSION = "4.0.0"
RUNNER_FLAGS = ["-Q", "-E", "-K", "-L"]
PER_TEST_TIMEOUT_SECONDS = 150
# Test numbers that need longer: 0081_admin runs ~40 admin cases, many of them waiting out
# librdkafka's own timeouts (measured: 126 s in all, 223 s before the brokers had no initial
# rebalance delay; 240 s leaves room on a busy machine). 0142 runs without -Q (NOT_QUICK): ~75 s.
LONGER_TIMEOUT_SECONDS = {"0081": 240, "0142": 300}
# Test numbers run without -Q: all their sub-tests are full ones (SUB_TEST), which quick mode
# skips, so that with -Q they would pass having tested nothing. 0142 then runs its five PLAIN/SCRAM
# cases (consumer, producer, transactional commit and abort, failed re-authentication), each
# spanning at least one connections.max.reauth.ms (10 s); it sets its own timeout to 9x that.
NOT_QUICK = {"0142"}
SUITE_BUDGET_SECONDS = 25 * 60
# librdkafka's default test scenario (tests/scenarios/default.json) is a cluster whose
# auto-created topics get 4 partitions; most tests produce to partitions 0..3. Its tests
# 0109, 0115 and 0119 deny themselves topics with kafka-acls.sh: ACLs are enforced.
# group.initial.rebalance.delay.ms=0: the value of Kafka's shipped development server.properties
# (its default, 3000, holds every new group's first join back 3 s): measured, the suite takes
# 761 s instead of 1,037 s.
BROKER_SETTINGS = {"num.partitions": "4", "group.initial.rebalance.delay.ms": "0", **AUTHORIZER}
# Test numbers that rely on Kafka's default initial rebalance delay, which the brokers of
# librdkafka's CI keep (trivup sets no group.initial.rebalance.delay.ms): they run against a
# broker of their own that keeps it too.
NEEDS_INITIAL_REBALANCE_DELAY = {
    # Its two consumers must land in one generation. Without the delay the second one's join
    # revokes the first one's partitions; that consumer's commit from its revoke callback then
    # succeeds (Kafka accepts a commit of the current generation while the group is preparing a
    # rebalance, ClassicGroup.validateOffsetCommit), where the test expects only the closing
    # consumer's revoke and a failed commit: "Expected closing consumer ...'s commit to fail".
    "0118": "commit_rebalance",
}
DELAYED_BROKER_SETTINGS = {**BROKER_SETTINGS, "group.initial.rebalance.delay.ms": "3000"}
SASL_TESTS = {
    "0135": "sasl_set_credentials() with PLAIN or SCRAM",
    "0142": "KIP-368 re-authentication; reads connections.max.reauth.ms with DescribeConfigs",
}
SASL_USER = ScramUser("SCRAM-SHA-512", "testuser", "testpass")
SASL_BROKER_SETTINGS = {
    **BROKER_SETTINGS,
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": SASL_USER.mechanism,
    "connections.max.reauth.ms": "10000",
}
# rapidjson-dev: tests 0053, 0098, 0101 and 0110 parse statistics JSON with RapidJSON and skip
# without it (./configure records WITH_RAPIDJSON in Makefile.config and config.h).
BUILD_PACKAGES = ["build-essential", "libssl-dev", "zlib1g-dev", "libzstd-dev", "liblz4-dev",
                  "python3", "rapidjson-dev"]
# Entries the runner never runs here: broker-less, socket emulation, known issue, manual.
NOT_APPLICABLE_FLAGS = ("TEST_F_LOCAL", "TEST_F_SOCKEM", "TEST_F_KNOWN_ISSUE)",
                        "TEST_F_KNOWN_ISSUE,", "TEST_F_KNOWN_ISSUE |", "TEST_F_MANUAL")
GROUPS = frozenset({8, 9, 10, 11, 12, 13, 14})  # OffsetCommit/Fetch, FindCoordinator, Join...Leave
TRANSACTIONS = GROUPS | {22, 24, 25, 26, 28}  # InitProducerId, AddPartitions/OffsetsToTxn, EndTxn
API_NAMES = {8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup",
             12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups",
             16: "ListGroups", 17: "SaslHandshake", 22: "InitProducerId",
             24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit",
             29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 36: "SaslAuthenticate",
             42: "DeleteGroups", 43: "ElectLeaders", 47: "OffsetDelete",
             50: "DescribeUserScramCredentials", 51: "AlterUserScramCredentials",
             68: "ConsumerGroupHeartbeat"}
SUMMARY_LINE = re.compile(r"^\|\s*(\S+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|"
                          r"\s*([\d.]+)s\s*\|\s*(.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\x1b\(B")
# What a test's source calls, and the API keys that call needs from the broker.
REQUIREMENTS = (
    (re.compile(r"rd_kafka_subscribe|test_consumer_subscribe|->subscribe\(|rd_kafka_commit\b|"
                r"commitSync|commitAsync|rd_kafka_committed|->committed\(|"
                r"rd_kafka_consumer_group_metadata\(|rd_kafka_list_groups|ConsumerGroup|"
                # test.c's helper subscribes; broker offset storage is the group's
                r"test_consume_msgs_easy|offset\.store\.method"),
     GROUPS),
    (re.compile(r"init_transactions|transactional\.id"), TRANSACTIONS),
    (re.compile(r"rd_kafka_(Create|Describe|Delete)Acls"), frozenset({29, 30, 31})),
    (re.compile(r"rd_kafka_DeleteGroups"), frozenset({42})),
    (re.compile(r"rd_kafka_ElectLeaders"), frozenset({43})),
    (re.compile(r"UserScramCredentials"), frozenset({50, 51})),
)


def prepare(cache: Path) -> Path:
    """The built ``tests/`` directory; each step runs only if its output is missing."""
    package = cache / f"node-rdkafka-{NODE_RDKAFKA_VERSION}"
    source = package / "package" / "deps" / "librdkafka"
    if not (source / "tests").is_dir():
        package.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "pack", "--silent", f"node-rdkafka@{NODE_RDKAFKA_VERSION}"],
                       cwd=package, check=True, stdout=subprocess.DEVNULL)
        with tarfile.open(package / f"node-rdkafka-{NODE_RDKAFKA_VERSION}.tgz") as tar:
            tar.extractall(package, filter="data")
    _install_build_packages()
    if patch_for_one_node(source / "tests"):
        (source / "tests" / "test-runner").unlink(missing_ok=True)  # rebuilt below
    if not _configured_with_rapidjson(source):
        # Configured before rapidjson-dev was installed (or never): reconfigure, and rebuild
        # the libraries and tests, whose objects depend on the rewritten config.h.
        _build(source, ["./configure", "--no-download", "--disable-gssapi", "--disable-curl"])
        if not _configured_with_rapidjson(source):
            raise RuntimeError(f"./configure did not find RapidJSON; see {source}/config.log")
        (source / "src" / "librdkafka.a").unlink(missing_ok=True)
        (source / "tests" / "test-runner").unlink(missing_ok=True)
    if not (source / "src" / "librdkafka.a").exists():
        _build(source, ["make", "-j2", "libs"])
    if not (source / "tests" / "test-runner").exists():
        _build(source, ["make", "-j2", "-C", "tests", "build"])
    return source / "tests"


def _configured_with_rapidjson(source: Path) -> bool:
    """True once ./configure has run and found RapidJSON (``WITH_RAPIDJSON= y``)."""
    config = source / "Makefile.config"
    return config.exists() and re.search(r"^WITH_RAPIDJSON=\s*y\s*$", config.read_text(),
                                         re.MULTILINE) is not None


# ``test_create_topic_wait_exists(rk, topic, partitions, 3, 5000)`` (C) and
# ``Test::create_topic_wait_exists(c, topic, partitions, 3, 5000)`` (C++): replication factor 3.
_REPLICATION_FACTOR_3 = re.compile(
    r"((?:test_|Test::)create_topic_wait_exists\([^;]*?, )3(, 5000\))")


def patch_for_one_node(tests: Path) -> bool:
    """Give topics the tests create with replication factor 3 a factor of 1; True if a source
    changed (idempotent)."""
    changed = False
    for source in sorted([*tests.glob("0*.c"), *tests.glob("0*.cpp")]):
        text = source.read_text(errors="replace")
        patched = _REPLICATION_FACTOR_3.sub(r"\g<1>1\2", text)
        if patched != text:
            source.write_text(patched)
            changed = True
    return changed


def _install_build_packages() -> None:
    missing = [name for name in BUILD_PACKAGES
               if subprocess.run(["dpkg", "-s", name], capture_output=True).returncode != 0]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise RuntimeError(f"install these Debian packages first: {' '.join(missing)}")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=environment)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=environment)


def _build(source: Path, command: list[str]) -> None:
    log = source / "compat-build.log"
    with open(log, "a") as output:
        completed = subprocess.run(command, cwd=source, stdout=output, stderr=subprocess.STDOUT)
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed in {source}; see {log}")


def list_tests(tests: Path) -> dict[str, list[str]]:
    """``{test number: [test names]}`` from test.c's table, without the never-applicable ones."""
    text = (tests / "test.c").read_text()
    table = text[text.index("struct test tests[] = {"):]
    table = table[:table.index("\n};")]
    by_number: dict[str, list[str]] = {}
    for entry in re.split(r"\b_TEST\(", table)[1:]:
        name = entry.split(",", 1)[0].strip()
        flags = entry.split(",", 2)[1] if "," in entry else ""
        if any(flag in flags + "," for flag in NOT_APPLICABLE_FLAGS) or not _runs_in_default(entry):
            continue
        by_number.setdefault(name[:4], []).append(name)
    return by_number


def _runs_in_default(entry: str) -> bool:
    """The runner runs a test whose ``.scenario`` contains the current one (``strstr``): here
    ``default``, so ``"default,ak23"`` (0103_transactions) runs and ``"noautocreate"`` does not."""
    scenario = re.search(r'\.scenario\s*=\s*"([^"]*)"', entry)
    return scenario is None or "default" in scenario.group(1)


# Found by running them: what the source patterns above do not show.
ALSO_NEEDS_GROUPS = {
    "0051": GROUPS,  # assign() without an offset reads the group's committed offset
    "0067": GROUPS,  # KafkaConsumer::assign() likewise
}
# Kafka's Java tools the tests shell out to (``test_kafka_cmd("kafka-xxx.sh ...")`` via
# KAFKA_PATH, and ``test_kafka_topics``); compat.kafka_home installs stand-ins for some.
KAFKA_TOOL_CALL = re.compile(r'test_kafka_cmd\(\s*"([\w.-]+)')
# Tests that run a Java program of their own (``test_run_java``) on every path.
NEEDS_JAVA = {"0098": "drives Kafka's Java producer (TransactionProducerCli via test_run_java)"}


def needs_kafka_cli(tests: Path, number: str) -> list[str]:
    """The Kafka tools a test number calls that have no stand-in (empty: it can run)."""
    called = {match.group(1) for source in tests.glob(f"{number}-*.c*")
              for match in KAFKA_TOOL_CALL.finditer(source.read_text(errors="replace"))}
    return sorted(called - STAND_INS.keys())


def required_apis(tests: Path, number: str) -> frozenset[int]:
    """The API keys a test number's source files call for (see ``REQUIREMENTS``)."""
    needed: set[int] = set(ALSO_NEEDS_GROUPS.get(number, ()))
    for source in sorted(tests.glob(f"{number}-*.c")) + sorted(tests.glob(f"{number}-*.cpp")):
        text = source.read_text(errors="replace")
        for pattern, keys in REQUIREMENTS:
            if pattern.search(text):
                needed |= keys
    return frozenset(needed)


@dataclass
class Target:
    """A broker some test numbers run against, and the ``test.conf`` that points them at it."""

    label: str
    broker: SamsaBroker
    bootstrap: str
    test_conf: Path


def run(cache: Path, results: Path, *, only: list[str] | None = None, run_all: bool = False,
        jobs: int = 1) -> SuiteResult:
    tests = prepare(cache)
    logs = results / "logs" / "librdkafka"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    # This run's own test.conf files (RDKAFKA_TEST_CONF), not tests/test.conf, which another
    # run of the suite at the same time would point at its broker.
    conf_dir = Path(tempfile.mkdtemp(prefix="samsa-rdkafka-conf-"))
    targets = [_plaintext_target("broker", results, conf_dir, BROKER_SETTINGS)]
    started = time.monotonic()
    try:
        advertised = targets[0].broker.api_versions()
        numbers = list_tests(tests)
        outcomes, runnable = _plan(tests, numbers, [n for n in numbers if not only or n in only],
                                   advertised, run_all)
        delayed = [number for number in runnable if number in NEEDS_INITIAL_REBALANCE_DELAY]
        sasl = [number for number in runnable if number in SASL_TESTS]
        passes = [(targets[0], [n for n in runnable if n not in delayed and n not in sasl])]
        if delayed:
            targets.append(_plaintext_target("delayed-broker", results, conf_dir,
                                             DELAYED_BROKER_SETTINGS))
            passes.append((targets[-1], delayed))
        if sasl:
            targets.append(_sasl_target(results, conf_dir))
            passes.append((targets[-1], sasl))
        deadline = started + SUITE_BUDGET_SECONDS
        home = kafka_home(cache)
        for target, chosen in passes:
            outcomes += _run_pass(tests, numbers, chosen, logs, target, deadline, home, jobs)
    finally:
        exit_codes = [target.broker.stop() for target in targets]
        shutil.rmtree(conf_dir, ignore_errors=True)
    notes = [f"{target.label} ({', '.join(chosen) if index else 'the others'}) exited {code}"
             for index, ((target, chosen), code) in enumerate(zip(passes, exit_codes, strict=True))]
    notes.append("advertised APIs: " + ", ".join(str(key) for key in sorted(advertised)))
    return SuiteResult("librdkafka", "2.12.0", time.monotonic() - started, outcomes, notes)


def _plaintext_target(label: str, results: Path, conf_dir: Path,
                      settings: dict[str, str]) -> Target:
    broker = SamsaBroker(results / "logs" / f"librdkafka-{label}.log", settings).start()
    test_conf = conf_dir / f"test-{label}.conf"
    test_conf.write_text(f"bootstrap.servers={broker.bootstrap}\n")
    return Target(label, broker, broker.bootstrap, test_conf)


def _sasl_target(results: Path, conf_dir: Path) -> Target:
    """The SASL broker (``SASL_BROKER_SETTINGS``), its user created, and a test.conf for it."""
    label = f"sasl-{SASL_USER.mechanism.lower()}-broker"
    broker = SamsaBroker(results / "logs" / f"librdkafka-{label}.log",
                         SASL_BROKER_SETTINGS).start()
    try:
        create_scram_users(broker.address("PLAINTEXT"), [SASL_USER])
        bootstrap = broker.address("SASL_PLAINTEXT")
    except Exception:
        broker.stop()
        raise
    test_conf = conf_dir / f"test-{label}.conf"
    test_conf.write_text(f"bootstrap.servers={bootstrap}\n"
                         "security.protocol=SASL_PLAINTEXT\n"
                         f"sasl.mechanism={SASL_USER.mechanism}\n"
                         f"sasl.username={SASL_USER.name}\n"
                         f"sasl.password={SASL_USER.password}\n")
    return Target(label, broker, bootstrap, test_conf)


def _plan(tests: Path, numbers: dict[str, list[str]], selected: list[str],
          advertised: dict[int, tuple[int, int]], run_all: bool
          ) -> tuple[list[Outcome], list[str]]:
    """(outcomes of the test numbers skipped here, the numbers to run)."""
    outcomes: list[Outcome] = []
    runnable = []
    for number in selected:
        missing = sorted(required_apis(tests, number) - advertised.keys())
        tools = needs_kafka_cli(tests, number)
        if tools or number in NEEDS_JAVA:
            reason = NEEDS_JAVA.get(number) or f"runs Kafka's {', '.join(tools)}"
            outcomes += [Outcome(name, "skipped", 0.0, f"samsa compat: {reason}, which this "
                                 "harness does not install") for name in numbers[number]]
        elif missing and not run_all:
            reason = "needs " + ", ".join(API_NAMES.get(key, str(key)) for key in missing)
            outcomes += [Outcome(name, "skipped", 0.0, f"samsa compat: {reason}")
                         for name in numbers[number]]
        else:
            runnable.append(number)
    return outcomes, runnable


def _run_pass(tests: Path, numbers: dict[str, list[str]], chosen: list[str], logs: Path,
              target: Target, deadline: float, home: Path, jobs: int) -> list[Outcome]:
    outcomes: list[Outcome] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for found in pool.map(lambda number: _run_number(
                tests, number, numbers[number], logs, target, deadline, home), chosen):
            outcomes += found
    return outcomes


def _run_number(tests: Path, number: str, names: list[str], logs: Path, target: Target,
                deadline: float, home: Path) -> list[Outcome]:
    if time.monotonic() > deadline:
        return [Outcome(name, "skipped", 0.0, "samsa compat: suite time budget used up")
                for name in names]
    if not target.broker.alive():
        return [Outcome(name, "failed", 0.0, "Samsa broker is no longer running",
                        "unexplained: possible Samsa bug") for name in names]
    environment = {**os.environ, "TESTS": number, "TEST_KAFKA_VERSION": TEST_KAFKA_VERSION,
                   "RDKAFKA_TEST_CONF": str(target.test_conf), "RDKAFKA_GITVER": "node-rdkafka",
                   "LD_LIBRARY_PATH": "../src:../src-cpp", "KAFKA_PATH": str(home),
                   "BROKERS": target.bootstrap}
    log_path = logs / f"{number}.log"
    started = time.monotonic()
    timed_out = False
    with open(log_path, "w") as log:
        flags = [flag for flag in RUNNER_FLAGS if not (number in NOT_QUICK and flag == "-Q")]
        process = subprocess.Popen(["./test-runner", *flags], cwd=tests, env=environment,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(_timeout(number))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code, timed_out = process.wait(), True
    output = ANSI.sub("", log_path.read_text(errors="replace"))
    return _outcomes(names, output, code, timed_out, time.monotonic() - started,
                     _timeout(number))


def _timeout(number: str) -> int:
    return LONGER_TIMEOUT_SECONDS.get(number, PER_TEST_TIMEOUT_SECONDS)


def _outcomes(names: list[str], output: str, code: int, timed_out: bool,
              seconds: float, timeout: int = PER_TEST_TIMEOUT_SECONDS) -> list[Outcome]:
    found: dict[str, Outcome] = {}
    for line in output.splitlines():
        match = SUMMARY_LINE.match(line.strip())
        if match and match.group(1) in names:
            name, state, duration, reason = match.groups()
            status = {"PASSED": "passed", "SKIPPED": "skipped"}.get(state, "failed")
            found[name] = Outcome(name, status, float(duration), reason.strip()[:500])
    tail = _first_failure(output) or " | ".join(
        line for line in output.splitlines()[-6:] if line.strip())[:500]
    for name in names:
        if name not in found:
            why = (f"timed out after {timeout}s" if timed_out
                   else f"test-runner exited {code} without a summary")
            found[name] = Outcome(name, "failed", seconds, f"{why}: {tail}")
    for outcome in found.values():
        if outcome.status == "failed":
            outcome.category = "unexplained: possible Samsa bug"
    return list(found.values())


def _first_failure(output: str) -> str:
    """The runner's own ``### Test ... failed at ...`` line and the assertion after it."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("### Test") and " failed at " in line:
            return " ".join(lines[index:index + 2])[:500]
    return ""

"""librdkafka's C/C++ test suite (``tests/`` of the copy node-rdkafka bundles) against Samsa.

Fetched with ``npm pack node-rdkafka@VERSION`` into ``.cache/compat/`` and built once:
``./configure --no-download --disable-gssapi --disable-curl``, ``make libs``,
``make -C tests build`` (Debian build dependencies, rapidjson-dev included, are apt-installed
first if missing; a build configured without RapidJSON is reconfigured and rebuilt once).
librdkafka's test cluster has 3 brokers and some tests (0098, 0101, 0103) create their
topics with replication factor 3, which one node must refuse (Kafka's too): before the build,
those calls are patched to replication factor 1 (``patch_for_one_node``), nothing else.
``--brokers 3`` (``brokers``): every broker below is a cluster of three Samsa nodes
(``compat.samsa_cluster``, ``test.conf``'s ``bootstrap.servers`` lists all three), the skip
table is checked with ``Facts.brokers`` = 3, results go to ``librdkafka-cluster.json`` (or
``librdkafka-full-cluster.json``), and the tests run from ``tests-cluster/``
(``prepare_cluster_tests``): a copy of the built ``tests/`` whose patched sources are put back
as the archive has them (replication factor 3), those objects and the runner rebuilt.
Tests that shell out to Kafka's Java tools get Apache Kafka's own kafka-topics.sh and kafka-acls.sh
on ``KAFKA_PATH`` (``compat.kafka_home``, from the jars in ``.cache/kafka/``); those that build and run Java programs of their own (0098,
0113's Java interop case) get Kafka's client jar from Maven and a kafka-run-class.sh. The broker enforces ACLs (``AUTHORIZER``) and, like Kafka's
shipped development ``server.properties``, has ``group.initial.rebalance.delay.ms=0``, so a
consumer group's first join is not held back 3 s (``BROKER_SETTINGS``).

The test numbers in ``NEEDS_INITIAL_REBALANCE_DELAY`` (0089, 0113, 0118) assume Kafka's default
delay, which librdkafka's CI brokers keep: they run in a pass of their own, against a broker that
keeps it.

SASL: the test numbers in ``SASL_TESTS`` skip themselves unless ``test.conf`` sets
``security.protocol=SASL_PLAINTEXT`` with a PLAIN or SCRAM ``sasl.mechanism``. They run in a
pass of their own, against a broker with a PLAINTEXT and a SASL_PLAINTEXT listener, set up as
librdkafka's own CI sets its SASL cluster up (trivup, ``tests/sasl_test.py`` and
``interactive_broker_version.py``): SCRAM-SHA-512, one user ``testuser``/``testpass`` (created
through the PLAINTEXT listener with AlterUserScramCredentials) and
``connections.max.reauth.ms=10000``; their ``test.conf`` points at the SASL listener with those
credentials. 0126 (OAUTHBEARER/OIDC) is not among them: Samsa does not serve it.

SSL: the test numbers in ``SSL_TESTS`` (0097_ssl_verify) skip themselves unless trivup's
``SSL_*`` variables are set. They run in a pass of their own, against a broker with a PLAINTEXT
and an SSL listener, set up as librdkafka's CI sets its SSL cluster up (trivup ``--ssl``): the
certificates of ``compat.trivup_ssl`` (two CAs, the client's key and certificate in PEM, DER and
PKCS#12), the broker's key store and trust store from them, ``ssl.client.auth`` as
``SSL_CLIENT_AUTH`` says; the runner gets the ``SSL_*`` environment, and its ``test.conf`` points
at the SSL listener with the client's ``ssl.*`` lines.

Two modes (``Mode``). ``QUICK`` (``make compat``): test-runner flags ``-Q -E -K -L`` — quick
mode (except for ``NOT_QUICK``), no socket-emulation, no known-issue and no broker-less tests.
Quick mode stops many tests early and still counts them passed. ``FULL`` (``make compat-full``):
no ``-Q``, and socket-emulation tests included when the build has ``WITH_SOCKEM`` (test-runner's
default on Linux), with per-test timeouts and a budget suited to it; its results go to
``librdkafka-full.json``. Each test number runs in its own ``test-runner`` process
(``TESTS=NNNN``), so one hang or crash costs one test, under a wall-clock timeout and an overall
time budget. A ``test.conf`` of the run's own (``RDKAFKA_TEST_CONF``, so that runs at the same
time do not share one) points ``bootstrap.servers`` at the broker; ``TEST_KAFKA_VERSION`` is the
Kafka version kafka-python infers from Samsa's ApiVersions. Outcomes are read from the runner's
summary table.

Verdict: the entries of ``compat/skips.py`` that apply on this run are not run (a number is left
out when all its tests are); every other outcome but a pass fails the run — a failed test, a
skip the table does not tolerate now, a test missing from the summary (crash), a timeout, a test
left unrun because the budget was used up, a runner that exited non-zero, a broker that died or
did not stop cleanly.
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
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from compat import skips
from compat.fault_proxy import Fault
from compat.kafka_home import install_kafka_jars, kafka_home
from compat.results import Outcome, SuiteResult, exit_problem, judge_skips, unmatched_entries
from compat.samsa_broker import (
    AUTHORIZER,
    SamsaBroker,
    ScramUser,
    create_scram_users,
)
from compat.samsa_cluster import SamsaCluster, start_brokers
from compat.trivup_ssl import make_pki

NODE_RDKAFKA_VERSION = "3.6.1"  # bundles librdkafka 2.12.0
LIBRDKAFKA_VERSION = "2.12.0"


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
    # Two consumers subscribe at once to a one-partition topic and must land in one generation:
    # the one without the partition expects its first message only after the other exceeds
    # max.poll.interval.ms. Without the delay the second join moves the partition at once:
    # "Consumer 0: did not expect message for at least 7092ms" (full mode; quick mode skips it).
    "0089": "max_poll_interval",
    # l_unsubscribe (full mode) subscribes two consumers at once and expects one assignment
    # each; without the delay the second join revokes and reassigns the first one's partitions:
    # "Expecting consumer 1's assign_call_cnt to be 1 not: 3".
    "0113": "cooperative_rebalance",
}
DELAYED_BROKER_SETTINGS = {**BROKER_SETTINGS, "group.initial.rebalance.delay.ms": "3000"}


@dataclass(frozen=True)
class Mode:
    name: str
    suite: str  # the results' name: compat/results/<suite>.json
    flags: tuple[str, ...]
    per_test_timeout_seconds: int
    budget_seconds: int
    broker_settings: Mapping[str, str]
    longer_timeout_seconds: Mapping[str, int] = field(default_factory=dict)

    @property
    def quick(self) -> bool:
        return "-Q" in self.flags

    @property
    def sockem(self) -> bool:
        return "-E" not in self.flags

    def timeout(self, number: str) -> int:
        return self.longer_timeout_seconds.get(number, self.per_test_timeout_seconds)

    def runner_flags(self, number: str) -> list[str]:
        return [flag for flag in self.flags if not (number in NOT_QUICK and flag == "-Q")]


# Test numbers run without -Q even in quick mode: all their sub-tests are full ones (SUB_TEST),
# which quick mode skips, so that with -Q they would pass having tested nothing. 0142 then runs
# its five PLAIN/SCRAM cases (consumer, producer, transactional commit and abort, failed
# re-authentication), each spanning at least one connections.max.reauth.ms (10 s); it sets its
# own timeout to 9x that.
NOT_QUICK = {"0142"}
QUICK = Mode(
    "quick", "librdkafka", ("-Q", "-E", "-K", "-L"), per_test_timeout_seconds=150,
    budget_seconds=25 * 60, broker_settings=BROKER_SETTINGS,
    # 0081_admin runs ~40 admin cases, many of them waiting out librdkafka's own timeouts
    # (measured: 126 s in all; 240 s leaves room on a busy machine). 0142 (NOT_QUICK): ~75 s.
    longer_timeout_seconds={"0081": 240, "0142": 300})


def full_mode(sockem: bool) -> Mode:
    """No -Q; socket-emulation tests too when the build has them. The runner enforces each
    test's own timeouts (``test_timeout_set``); the harness's per-test wall clock is only a
    backstop against a hung runner, so it is generous. The brokers keep Kafka's default
    initial rebalance delay, as librdkafka's CI brokers do: full mode's group tests start
    several consumers at once and expect one generation (0089, 0102 and 0113 failed without
    it), and fidelity matters more here than the 3 s per new group."""
    return Mode("full", "librdkafka-full", ("-K", "-L") if sockem else ("-E", "-K", "-L"),
                per_test_timeout_seconds=900, budget_seconds=150 * 60,
                broker_settings=DELAYED_BROKER_SETTINGS, longer_timeout_seconds={"0113": 2400})


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
SSL_TESTS = {"0097": "SSL certificate verification, client keys in PEM, DER and PKCS#12"}
# trivup's brokers default to ssl.client.auth=required; 0097 supports "requested" too (its
# SSL_client_auth, trivup's --conf '{"ssl_client_auth": "requested"}'), which this pass uses.
# With "required", 0097's untrusted-client cases (the client sends no certificate: its issuer is
# not among the CAs the broker names) expect Java's answer to a missing certificate, alert 42
# bad_certificate ("We should receive 42"); OpenSSL, under Python's ssl, answers 40
# handshake_failure (TLS 1.2; 116 certificate_required in TLS 1.3), which Python cannot change.
# Everything else passes with "required" too (measured: the first failure is that alert).
SSL_CLIENT_AUTH = "requested"
# rapidjson-dev: tests 0053, 0098, 0101 and 0110 parse statistics JSON with RapidJSON and skip
# without it (./configure records WITH_RAPIDJSON in Makefile.config and config.h).
BUILD_PACKAGES = ["build-essential", "libssl-dev", "zlib1g-dev", "libzstd-dev", "liblz4-dev",
                  "python3", "rapidjson-dev"]
# Entries the runner never runs here: broker-less, known issue, manual (socket emulation: by mode).
NOT_APPLICABLE_FLAGS = ("TEST_F_LOCAL", "TEST_F_KNOWN_ISSUE)", "TEST_F_KNOWN_ISSUE,",
                        "TEST_F_KNOWN_ISSUE |", "TEST_F_MANUAL")
SUMMARY_LINE = re.compile(r"^\|\s*(\S+)\s*\|\s*(PASSED|FAILED|SKIPPED|RUNNING|DNS)\s*\|"
                          r"\s*([\d.]+)s\s*\|\s*(.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\x1b\(B")


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


CLUSTER_TESTS = "tests-cluster"


def prepare_cluster_tests(tests: Path, cache: Path) -> Path:
    """``tests-cluster/`` next to ``tests/``: a copy of the built tests whose sources keep
    librdkafka's replication factor 3 (the originals from the npm archive), rebuilt (only
    those objects and the runner) for runs against a cluster of three."""
    cluster = tests.parent / CLUSTER_TESTS
    if (cluster / "test-runner").exists():
        return cluster
    shutil.rmtree(cluster, ignore_errors=True)
    shutil.copytree(tests, cluster, symlinks=True)
    archive = cache / f"node-rdkafka-{NODE_RDKAFKA_VERSION}" / f"node-rdkafka-{NODE_RDKAFKA_VERSION}.tgz"
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if member.name.startswith("package/deps/librdkafka/tests/0") and member.isfile():
                original = tar.extractfile(member)
                assert original is not None
                text = original.read()
                if (cluster / name).read_bytes() != text:  # patched: its object gets rebuilt
                    (cluster / name).write_bytes(text)
    (cluster / "test-runner").unlink(missing_ok=True)
    _build(tests.parent, ["make", "-j2", "-C", CLUSTER_TESTS, "build"])
    return cluster


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


def list_tests(tests: Path, *, sockem: bool = False) -> dict[str, list[str]]:
    """``{test number: [test names]}`` from test.c's table, without those the runner does not
    run here (broker-less, known issue, manual; socket emulation unless ``sockem``)."""
    text = (tests / "test.c").read_text()
    table = text[text.index("struct test tests[] = {"):]
    table = table[:table.index("\n};")]
    by_number: dict[str, list[str]] = {}
    for entry in re.split(r"\b_TEST\(", table)[1:]:
        name = entry.split(",", 1)[0].strip()
        flags = entry.split(",", 2)[1] if "," in entry else ""
        not_applicable = NOT_APPLICABLE_FLAGS + (() if sockem else ("TEST_F_SOCKEM",))
        if any(flag in flags + "," for flag in not_applicable) or not _runs_in_default(entry):
            continue
        by_number.setdefault(name[:4], []).append(name)
    return by_number


def _runs_in_default(entry: str) -> bool:
    """The runner runs a test whose ``.scenario`` contains the current one (``strstr``): here
    ``default``, so ``"default,ak23"`` (0103_transactions) runs and ``"noautocreate"`` does not."""
    scenario = re.search(r'\.scenario\s*=\s*"([^"]*)"', entry)
    return scenario is None or "default" in scenario.group(1)


def built_with_sockem(tests: Path) -> bool:
    """True if ./configure enabled socket emulation (``WITH_SOCKEM= y`` in Makefile.config)."""
    config = tests.parent / "Makefile.config"
    return re.search(r"^WITH_SOCKEM=\s*y\s*$", config.read_text(), re.MULTILINE) is not None


@dataclass
class Target:
    """A broker some test numbers run against, and the ``test.conf`` that points them at it."""

    label: str
    broker: SamsaBroker | SamsaCluster
    bootstrap: str
    test_conf: Path
    environment: Mapping[str, str] = field(default_factory=dict)  # for the runner (SSL_*)


@dataclass(frozen=True)
class Run:
    """What every test number of one suite run shares."""

    tests: Path
    numbers: dict[str, list[str]]
    logs: Path
    home: Path
    mode: Mode
    deadline: float


def run(cache: Path, results: Path, *, full: bool = False, only: list[str] | None = None,
        jobs: int = 1, faults: tuple[Fault, ...] = (), brokers: int = 1) -> SuiteResult:
    tests = prepare(cache)
    mode = full_mode(built_with_sockem(tests)) if full else QUICK
    if brokers > 1:
        tests = prepare_cluster_tests(tests, cache)
        mode = replace(mode, suite=f"{mode.suite}-cluster")
    logs = results / "logs" / mode.suite
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    # This run's own test.conf files (RDKAFKA_TEST_CONF), not tests/test.conf, which another
    # run of the suite at the same time would point at its broker.
    conf_dir = Path(tempfile.mkdtemp(prefix="samsa-rdkafka-conf-"))
    targets = [_plaintext_target("broker", mode, results, conf_dir, mode.broker_settings,
                                 faults, brokers)]
    started = time.monotonic()
    problems: list[str] = []
    outcomes: list[Outcome] = []
    passes: list[tuple[Target, list[str]]] = []
    try:
        home = kafka_home(cache)
        facts = targets[0].broker.facts(quick_mode=mode.quick,
                                        java_tools=install_kafka_jars(home))
        tolerated = skips.applicable(skips.LIBRDKAFKA, facts)
        numbers = list_tests(tests, sockem=mode.sockem)
        selected = [number for number in numbers if not only or number in only]
        problems += [f"{number}: no such test number in this mode" for number in only or ()
                     if number not in numbers]
        outcomes, runnable = _plan(numbers, selected, tolerated)
        passes = _passes(runnable, targets, mode, results, conf_dir, faults, brokers)
        shared = Run(tests, numbers, logs, home, mode, started + mode.budget_seconds)
        for target, chosen in passes:
            found, trouble = _run_pass(shared, target, chosen, jobs, facts.kafka_version)
            outcomes, problems = outcomes + found, problems + trouble
    finally:
        for target in targets:
            if not target.broker.alive():
                problems.append(f"the Samsa broker {target.label} died during the run")
            problems += exit_problem(f"the Samsa broker {target.label}", target.broker.stop())
        shutil.rmtree(conf_dir, ignore_errors=True)
    judge_skips(outcomes, tolerated)
    if not only:
        problems += unmatched_entries(skips.entries(skips.LIBRDKAFKA), outcomes)
    notes = [f"{target.label}: {', '.join(chosen) if index else 'the others'}"
             for index, (target, chosen) in enumerate(passes)]
    notes.append(f"mode {mode.name}: test-runner {' '.join(mode.flags)}, jobs {jobs}, "
                 f"{brokers} broker(s) per pass, tests built in {tests.name}/")
    notes.append("advertised APIs: " + ", ".join(str(key) for key in sorted(facts.api_versions)))
    return SuiteResult(mode.suite, LIBRDKAFKA_VERSION, time.monotonic() - started, outcomes,
                       problems, notes)


def _passes(runnable: list[str], targets: list[Target], mode: Mode, results: Path,
            conf_dir: Path, faults: tuple[Fault, ...], brokers: int
            ) -> list[tuple[Target, list[str]]]:
    """The brokers to run against and the numbers for each (``targets`` grows)."""
    delayed = [number for number in runnable if number in NEEDS_INITIAL_REBALANCE_DELAY
               and mode.broker_settings != DELAYED_BROKER_SETTINGS]
    sasl = [number for number in runnable if number in SASL_TESTS]
    tls = [number for number in runnable if number in SSL_TESTS]
    passes = [(targets[0], [n for n in runnable if n not in {*delayed, *sasl, *tls}])]
    if delayed:
        targets.append(_plaintext_target("delayed-broker", mode, results, conf_dir,
                                         DELAYED_BROKER_SETTINGS, faults, brokers))
        passes.append((targets[-1], delayed))
    if sasl:
        targets.append(_sasl_target(mode, results, conf_dir, brokers))
        passes.append((targets[-1], sasl))
    if tls:
        targets.append(_ssl_target(mode, results, conf_dir, brokers))
        passes.append((targets[-1], tls))
    return passes


def _plaintext_target(label: str, mode: Mode, results: Path, conf_dir: Path,
                      settings: Mapping[str, str], faults: tuple[Fault, ...],
                      brokers: int = 1) -> Target:
    broker = start_brokers(results / "logs", f"{mode.suite}-{label}", settings,
                           brokers=brokers, faults=faults)
    test_conf = conf_dir / f"test-{mode.suite}-{label}.conf"
    test_conf.write_text(f"bootstrap.servers={broker.bootstrap}\n")
    return Target(label, broker, broker.bootstrap, test_conf)


def _sasl_target(mode: Mode, results: Path, conf_dir: Path, brokers: int = 1) -> Target:
    """The SASL broker (``SASL_BROKER_SETTINGS``), its user created, and a test.conf for it
    (no faults: the fault proxy serves one PLAINTEXT listener)."""
    label = f"sasl-{SASL_USER.mechanism.lower()}-broker"
    broker = start_brokers(results / "logs", f"{mode.suite}-{label}", SASL_BROKER_SETTINGS,
                           brokers=brokers)
    try:
        create_scram_users(broker.address("PLAINTEXT"), [SASL_USER])
        bootstrap = broker.address("SASL_PLAINTEXT")
    except Exception:
        broker.stop()
        raise
    test_conf = conf_dir / f"test-{mode.suite}-{label}.conf"
    test_conf.write_text(f"bootstrap.servers={bootstrap}\n"
                         "security.protocol=SASL_PLAINTEXT\n"
                         f"sasl.mechanism={SASL_USER.mechanism}\n"
                         f"sasl.username={SASL_USER.name}\n"
                         f"sasl.password={SASL_USER.password}\n")
    return Target(label, broker, bootstrap, test_conf)


def _ssl_target(mode: Mode, results: Path, conf_dir: Path, brokers: int = 1) -> Target:
    """The SSL broker (trivup's certificates, ``SSL_CLIENT_AUTH``) and a test.conf for it."""
    label = "ssl-broker"
    pki = make_pki(conf_dir / label, client_auth=SSL_CLIENT_AUTH)
    settings = {**mode.broker_settings, "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
                **pki.broker_settings()}
    broker = start_brokers(results / "logs", f"{mode.suite}-{label}", settings, brokers=brokers)
    try:
        bootstrap = broker.address("SSL")
    except Exception:
        broker.stop()
        raise
    test_conf = conf_dir / f"test-{mode.suite}-{label}.conf"
    test_conf.write_text(f"bootstrap.servers={bootstrap}\n{pki.client_conf()}")
    return Target(label, broker, bootstrap, test_conf, pki.environment())


def _plan(numbers: dict[str, list[str]], selected: list[str], tolerated: Mapping[str, str]
          ) -> tuple[list[Outcome], list[str]]:
    """(outcomes of the numbers not run: all their tests are tolerated skips now, the numbers
    to run)."""
    outcomes: list[Outcome] = []
    runnable = []
    for number in selected:
        if all(name in tolerated for name in numbers[number]):
            outcomes += [Outcome(name, "skipped", 0.0, f"samsa compat: {tolerated[name]}")
                         for name in numbers[number]]
        else:
            runnable.append(number)
    return outcomes, runnable


def _run_pass(shared: Run, target: Target, chosen: list[str], jobs: int,
              kafka_version: tuple[int, ...]) -> tuple[list[Outcome], list[str]]:
    """The outcomes of the ``chosen`` numbers against ``target``, and a problem per runner
    that exited non-zero though none of its tests failed."""
    outcomes: list[Outcome] = []
    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for number, (found, code) in zip(chosen, pool.map(
                lambda number: _run_number(shared, number, target, kafka_version), chosen),
                                         strict=True):
            outcomes += found
            problems += runner_problem(number, found, code)
    return outcomes, problems


def runner_problem(number: str, outcomes: list[Outcome], code: int) -> list[str]:
    """A problem if the runner exited non-zero though none of its tests failed."""
    if code == 0 or any(outcome.status == "failed" for outcome in outcomes):
        return []
    return [f"{number}: test-runner exited {code} though no test failed"]


def _run_number(shared: Run, number: str, target: Target,
                kafka_version: tuple[int, ...]) -> tuple[list[Outcome], int]:
    """The number's outcomes and its runner's exit code."""
    names = shared.numbers[number]
    if time.monotonic() > shared.deadline:
        return [Outcome(name, "failed", 0.0, f"not run: the suite's time budget of "
                        f"{shared.mode.budget_seconds}s was used up") for name in names], 0
    if not target.broker.alive():
        return [Outcome(name, "failed", 0.0, "not run: the Samsa broker is no longer running")
                for name in names], 0
    environment = {**os.environ, "TESTS": number,
                   "TEST_KAFKA_VERSION": ".".join(map(str, kafka_version)),
                   "RDKAFKA_TEST_CONF": str(target.test_conf), "RDKAFKA_GITVER": "node-rdkafka",
                   "LD_LIBRARY_PATH": "../src:../src-cpp", "KAFKA_PATH": str(shared.home),
                   "BROKERS": target.bootstrap, **target.environment}
    log_path = shared.logs / f"{number}.log"
    started = time.monotonic()
    timed_out = False
    timeout = shared.mode.timeout(number)
    with open(log_path, "w") as log:
        process = subprocess.Popen(["./test-runner", *shared.mode.runner_flags(number)],
                                   cwd=shared.tests, env=environment, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            code, timed_out = process.wait(), True
    output = ANSI.sub("", log_path.read_text(errors="replace"))
    return _outcomes(names, output, code, timed_out, time.monotonic() - started, timeout), code


def _outcomes(names: list[str], output: str, code: int, timed_out: bool,
              seconds: float, timeout: int) -> list[Outcome]:
    """The outcomes of one test number from its runner's output; a test missing from the
    summary failed (crash or timeout)."""
    found: dict[str, Outcome] = {}
    for line in output.splitlines():
        match = SUMMARY_LINE.match(line.strip())
        if match and match.group(1) in names:
            name, state, duration, reason = match.groups()
            status = {"PASSED": "passed", "SKIPPED": "skipped"}.get(state, "failed")
            first_failure = _first_failure(output) if status == "failed" else ""
            found[name] = Outcome(name, status, float(duration),
                                  (first_failure or reason.strip())[:500])
    tail = _first_failure(output) or " | ".join(
        line for line in output.splitlines()[-6:] if line.strip())[:500]
    for name in names:
        if name not in found:
            why = (f"timed out after {timeout}s" if timed_out
                   else f"test-runner exited {code} without a summary")
            found[name] = Outcome(name, "failed", seconds, f"{why}: {tail}")
    return list(found.values())


def _first_failure(output: str) -> str:
    """The runner's own ``### Test ... failed at ...`` line and the assertion after it."""
    lines = output.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("### Test") and " failed at " in line:
            return " ".join(lines[index:index + 2])[:500]
    return ""

"""Apache Kafka itself, the yardstick: its jars fetched from Maven Central, its tools run through
their main classes, and a single KRaft node started beside Samsa.

Layout (``.cache/kafka/<version>/``, written once, on first use, by ``kafka_home()``)::

    libs/          kafka_2.13, kafka-tools, kafka-shell and their runtime dependencies, plus the
                   log4j2 binding for slf4j (Maven's ``dependency:copy-dependencies``)
    log4j2.properties        tools: WARN and above on stderr, nothing on stdout
    broker-log4j2.properties the broker: INFO to ``$KAFKA_LOG_FILE``

The fetch goes to a temporary directory renamed into place, so an interrupted fetch leaves
nothing a later run would take for a whole one. ``KAFKA_VERSION`` is the newest 4.x whose
artifacts Maven Central serves whole here: 4.4.0's ``kafka-shell`` (``kafka-metadata-shell``)
is refused, 4.3.1's is served.

``spark_kafka_jars()`` fetches Spark's built-in Kafka source (``spark-sql-kafka-0-10``) for the
installed PySpark into ``.cache/kafka/spark-sql-kafka-<version>/``; PySpark is pinned to 4.2.0,
the newest release whose connector Maven serves (4.2.1's and 4.3.0's are not published there).

No Java of Samsa's: Java runs Kafka's own classes only. Where ``java`` or ``mvn`` is missing,
or Maven refuses an artifact, ``KafkaUnavailable`` says which and how to install it.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from compat.samsa_cluster import free_ports

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "kafka"
KAFKA_VERSION = "4.3.1"
ARTIFACTS = (
    f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}",
    f"org.apache.kafka:kafka-shell:{KAFKA_VERSION}",
    "org.apache.logging.log4j:log4j-slf4j-impl:2.25.5",  # Kafka's slf4j 1.7 logs through log4j2
)
# The shell scripts of Kafka's bin/ and the classes they run.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",  # org.apache.kafka.tools from 4.4
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "kafka-metadata-shell": "org.apache.kafka.shell.MetadataShell",
    "kafka-storage": "kafka.tools.StorageTool",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    # Share groups (KIP-932, issue 15)
    "kafka-verifiable-share-consumer": "org.apache.kafka.tools.VerifiableShareConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-share-consumer-perf-test": "org.apache.kafka.tools.ShareConsumerPerformance",
    # No bin/ script: Kafka's system tests run it through kafka-run-class.sh.
    "transactional-message-copier": "org.apache.kafka.tools.TransactionalMessageCopier",
    "kafka-server-start": "kafka.Kafka",
}
# A tool is a short-lived JVM: a small heap, the client compiler only, the serial collector.
TOOL_JVM = ("-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")
# Kafka's shipped defaults (kafka-server-start.sh: KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS).
BROKER_HEAP = ("-Xmx1G", "-Xms1G")
BROKER_JVM = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
              "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
              "-Djava.awt.headless=true")
TOOL_LOG4J = """\
status = error
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
"""
BROKER_LOG4J = """\
status = error
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = ${env:KAFKA_LOG_FILE}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = FILE
"""
FETCH_TIMEOUT_SECONDS = 900


class KafkaUnavailable(RuntimeError):
    """Java, Maven or an artifact is missing; the message says which and what to do."""


def kafka_home(cache: Path = CACHE) -> Path:
    """``.cache/kafka/<version>``, its jars fetched from Maven Central on first use."""
    home = cache / KAFKA_VERSION

    def finish(staging: Path) -> None:
        (staging / "log4j2.properties").write_text(TOOL_LOG4J)
        (staging / "broker-log4j2.properties").write_text(BROKER_LOG4J)

    return maven_fetch(ARTIFACTS, home, marker="kafka_2.13-*.jar", finish=finish)


def spark_kafka_jars(cache: Path = CACHE) -> list[Path]:
    """Spark's built-in Kafka source (``spark-sql-kafka-0-10``) for the pinned PySpark and the
    jars it needs that PySpark does not ship, for ``spark.jars``."""
    import pyspark

    home = maven_fetch((f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}",),
                       cache / f"spark-sql-kafka-{pyspark.__version__}",
                       marker="spark-sql-kafka-*.jar")
    shipped = {_artifact(jar.name) for jar in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(jar for jar in (home / "libs").glob("*.jar") if _artifact(jar.name) not in shipped)


def _artifact(jar_name: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients`` (``spark-sql-kafka-0-10_2.13-4.2.0.jar``
    -> ``spark-sql-kafka``: enough to tell whether PySpark ships an artifact)."""
    return re.sub(r"-\d[\w.-]*\.jar$", "", jar_name)


def maven_fetch(artifacts: Sequence[str], home: Path, *, marker: str,
                finish: Callable[[Path], None] | None = None) -> Path:
    """``home/libs``: ``artifacts`` and their runtime dependencies from Maven Central, fetched
    once (into a temporary directory renamed into place); ``marker`` globs a jar that shows a
    whole fetch."""
    if (home / "libs").is_dir() and any((home / "libs").glob(marker)):
        return home
    for program in ("java", "mvn"):
        if shutil.which(program) is None:
            raise KafkaUnavailable(
                f"{program} is not installed: {', '.join(artifacts)} need Java 17+ and Maven "
                "(Debian: apt-get install openjdk-17-jre-headless maven)")
    home.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{home.name}-", dir=home.parent))
    try:
        _fetch(artifacts, staging)
        if finish is not None:
            finish(staging)
        try:
            staging.rename(home)
        except OSError:  # another process fetched it meanwhile
            if not (home / "libs").is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return home


def _fetch(artifacts: Sequence[str], staging: Path) -> None:
    dependencies = "".join(
        f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></dependency>"
        for group, artifact, version in (coordinate.split(":") for coordinate in artifacts))
    pom = staging / "pom.xml"
    pom.write_text('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0'
                   "</modelVersion><groupId>samsa.compat</groupId><artifactId>yardstick"
                   f"</artifactId><version>1</version><dependencies>{dependencies}"
                   "</dependencies></project>")
    fetched = subprocess.run(
        ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(pom),
         "dependency:copy-dependencies", "-DincludeScope=runtime",
         f"-DoutputDirectory={staging / 'libs'}"],
        capture_output=True, text=True, timeout=FETCH_TIMEOUT_SECONDS, check=False)
    pom.unlink()
    if fetched.returncode != 0:
        errors = [line for line in fetched.stdout.splitlines() if "ERROR" in line][:3]
        raise KafkaUnavailable(f"Maven could not fetch {', '.join(artifacts)}: "
                               f"{' '.join(errors)[:1500]}")


def java_command(main_class: str, args: Sequence[str], *, home: Path | None = None,
                 jvm: Sequence[str] = TOOL_JVM, log4j: str = "log4j2.properties") -> list[str]:
    """The ``java`` command line that runs ``main_class`` from Kafka's jars."""
    home = home or kafka_home()
    return ["java", *jvm, f"-Dlog4j2.configurationFile={home / log4j}",
            "-cp", str(home / "libs" / "*"), main_class, *args]


def run_tool(tool: str, *args: str, timeout: float = 120, stdin: str | None = None,
             check: bool = False) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools (``kafka-topics``, ``kafka-dump-log``, ...) through its main
    class, as ``bin/<tool>.sh`` would; ``check``: raise with its output when it fails."""
    command = java_command(TOOLS[tool], args)
    result = subprocess.run(command, input=stdin, capture_output=True, text=True,
                            timeout=timeout, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"{tool} {' '.join(args)} exited {result.returncode}:\n"
                             f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def random_cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` prints one (URL-safe base64, 22 chars)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def free_port() -> int:
    """A port for a Kafka node to listen on (``compat.samsa_cluster.free_ports``: below the
    ephemeral range, so no port-0 bind or outgoing connection takes it first)."""
    return free_ports(1)[0]


@dataclass
class ApacheKafka:
    """One Apache Kafka node in KRaft combined mode (broker and controller) on 127.0.0.1 with
    ephemeral ports: ``start()`` formats ``directory/data`` (``format_storage``), starts the JVM
    (``launch``) and waits until the broker answers (``wait_ready``); ``stop()`` sends SIGTERM
    (a clean shutdown), ``kill()`` SIGKILL. A node of a multi-node quorum names every voter in
    ``voters`` (``ApacheKafkaCluster``)."""

    directory: Path
    configs: Mapping[str, str] = field(default_factory=dict)
    heap: Sequence[str] = BROKER_HEAP
    node_id: int = 1
    port: int = 0
    controller_port: int = 0
    cluster_id: str = field(default_factory=random_cluster_id)
    voters: str = ""  # controller.quorum.voters of a multi-node quorum; "" = this node alone
    process: subprocess.Popen[bytes] | None = None
    _log_start: int = field(default=0, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def data(self) -> Path:
        return self.directory / "data"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    def properties(self) -> dict[str, str]:
        return {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            "controller.quorum.voters": self.voters or f"{self.node_id}@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.data),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            **self.configs,
        }

    def start(self, timeout_s: float = 90) -> ApacheKafka:
        self.format_storage()
        self.launch()
        self.wait_ready(timeout_s)
        return self

    def format_storage(self) -> Path:
        """Pick the ports, write ``server.properties`` and format ``data`` (``kafka-storage
        format``) unless it is formatted already; the properties file."""
        self.port = self.port or free_port()
        self.controller_port = self.controller_port or free_port()
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "server.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.properties().items()))
        if not (self.data / "meta.properties").exists():
            run_tool("kafka-storage", "format", f"--cluster-id={self.cluster_id}", "-c", str(config),
                     "--ignore-formatted", check=True)
        return config

    def launch(self) -> None:
        """Start the JVM (``kafka.Kafka``) on the formatted directory without waiting for it."""
        home = kafka_home()
        env = {**os.environ, "KAFKA_LOG_FILE": str(self.log_file)}
        # a restarted node appends to its log: only what this run writes counts as ready
        self._log_start = self.log_file.stat().st_size if self.log_file.exists() else 0
        with open(self.directory / "stderr.log", "ab") as stderr:  # the child keeps its copy
            self.process = subprocess.Popen(
                java_command(TOOLS["kafka-server-start"], [str(self.directory / "server.properties")],
                             home=home, jvm=(*self.heap, *BROKER_JVM),
                             log4j="broker-log4j2.properties"),
                env=env, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)

    def wait_ready(self, timeout_s: float = 90) -> None:
        """Until this run's log says "Kafka Server started" (RuntimeError if the JVM exits)."""
        deadline = time.monotonic() + timeout_s
        marker = "Kafka Server started"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"Apache Kafka exited with {self.process.returncode}; see "
                                   f"{self.log_file} and {self.directory / 'stderr.log'}")
            if self.log_file.exists() and marker in self._log_since_launch():
                return
            time.sleep(0.1)  # the JVM's own start: no event to await but its log line
        raise TimeoutError(f"Apache Kafka not started in {timeout_s} s; see {self.log_file}")

    def _log_since_launch(self) -> str:
        with open(self.log_file, "rb") as log:
            log.seek(self._log_start)
            return log.read().decode(errors="replace")

    def stop(self, timeout_s: float = 60) -> int | None:
        return self._signal(signal.SIGTERM, timeout_s)

    def kill(self) -> int | None:
        return self._signal(signal.SIGKILL, 30)

    def _signal(self, signum: int, timeout_s: float) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        os.killpg(self.process.pid, signum)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait(30)


@dataclass
class ApacheKafkaCluster:
    """``size`` Apache Kafka nodes on 127.0.0.1, each a combined broker and controller, the
    ``size`` of them one KRaft quorum (static ``controller.quorum.voters``) of one cluster id:
    node ``N`` lives in ``directory/node-N``. ``start()`` formats every node, starts every JVM,
    then waits for each (a node's broker starts only once the quorum has a leader, so they must
    all be launched before any is awaited). The internal topics keep Kafka's default
    replication factor, 3 (``configs`` may say otherwise)."""

    directory: Path
    size: int = 3
    configs: Mapping[str, str] = field(default_factory=dict)
    heap: Sequence[str] = BROKER_HEAP
    nodes: list[ApacheKafka] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    def start(self, timeout_s: float = 180) -> ApacheKafkaCluster:
        ports = {node_id: (free_port(), free_port()) for node_id in range(1, self.size + 1)}
        voters = ",".join(f"{node_id}@127.0.0.1:{controller}"
                          for node_id, (_, controller) in ports.items())
        cluster_id, internal = random_cluster_id(), str(min(3, self.size))
        defaults = {"offsets.topic.replication.factor": internal,
                    "transaction.state.log.replication.factor": internal,
                    "transaction.state.log.min.isr": str(min(2, self.size)),
                    "share.coordinator.state.topic.replication.factor": internal,
                    "share.coordinator.state.topic.min.isr": str(min(2, self.size))}
        self.nodes = [ApacheKafka(self.directory / f"node-{node_id}", {**defaults, **self.configs},
                                  self.heap, node_id, port, controller, cluster_id, voters)
                      for node_id, (port, controller) in ports.items()]
        try:
            for node in self.nodes:
                node.format_storage()
            for node in self.nodes:
                node.launch()
            for node in self.nodes:
                node.wait_ready(timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()

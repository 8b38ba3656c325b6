"""A Kafka installation directory for the peer suites, whose ``bin/`` runs Kafka's own tools.

The suites shell out to Kafka's Java tools: librdkafka's tests through ``$KAFKA_PATH/bin``,
kafka-python's fixtures through ``$KAFKA_ROOT/bin``. ``kafka_home(cache)`` writes
``.cache/compat/kafka-home/bin/<tool>.sh`` scripts:

- ``KAFKA_TOOLS`` (``kafka-topics.sh``, ``kafka-acls.sh``, ``kafka-storage.sh``): Apache Kafka's
  real tools, their main classes run from the jars ``compat.apache_kafka`` fetches into
  ``.cache/kafka/`` (the command line of ``compat.apache_kafka.java_command``), as Kafka's
  ``bin/`` scripts run them. ``kafka-storage.sh format --add-scram`` writes the users into a
  ``bootstrap.checkpoint`` that Samsa reads when its metadata log is empty
  (``replication.metadata.bootstrap``): kafka-python's SASL fixture relies on it.

A tool not listed is missing (a test calling it fails). There are no stand-ins left.

Java: librdkafka's tests 0098 (TransactionProducerCli) and 0113's Java interop sub-test
(IncrementalRebalanceCli; it skips itself whenever ``sasl.mechanism`` is set, which it always is)
build ``tests/java`` against ``$KAFKA_PATH/libs/kafka-clients-*.jar``
and run it through ``$KAFKA_PATH/bin/kafka-run-class.sh``. Where a JDK and Maven are installed,
``install_kafka_jars`` copies Kafka's client jar and its dependencies (``KAFKA_CLIENTS``) from
Maven Central into ``libs/`` once, and ``bin/kafka-run-class.sh`` runs ``java`` with
``$CLASSPATH`` and ``libs/*``.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from compat.apache_kafka import TOOLS, java_command

# Kafka's bin/ script -> the tool of compat.apache_kafka.TOOLS it runs.
KAFKA_TOOLS = {
    "kafka-topics.sh": "kafka-topics",
    "kafka-acls.sh": "kafka-acls",
    "kafka-storage.sh": "kafka-storage",
}
# The Kafka release whose client jar the Java test programs run with (TEST_KAFKA_VERSION's).
KAFKA_CLIENTS = "org.apache.kafka:kafka-clients:4.0.0"
SLF4J_BINDING = "org.slf4j:slf4j-simple:1.7.36"  # kafka-clients logs through slf4j-api
RUN_CLASS = '#!/bin/sh\nexec java -cp "${CLASSPATH}:$(dirname "$0")/../libs/*" "$@"\n'


def kafka_home(cache: Path) -> Path:
    """The directory (absolute: the suites run elsewhere) whose ``bin/`` holds the tools'
    scripts; rewritten on every call, so it follows the repository it is run from. Fetches
    Kafka's jars on first use (``compat.apache_kafka.kafka_home``)."""
    home = (cache / "kafka-home").resolve()
    (home / "bin").mkdir(parents=True, exist_ok=True)
    for script, tool in KAFKA_TOOLS.items():
        command = " ".join(shlex.quote(part) for part in java_command(TOOLS[tool], []))
        _write_script(home / "bin" / script, f'exec {command} "$@"')
    run_class = home / "bin" / "kafka-run-class.sh"
    run_class.write_text(RUN_CLASS)
    run_class.chmod(0o755)
    return home


def _write_script(path: Path, line: str) -> None:
    path.write_text(f"#!/bin/sh\n{line}\n")
    path.chmod(0o755)


def install_kafka_jars(home: Path) -> bool:
    """Kafka's client jar and its dependencies in ``home/libs`` (Maven, once); False where no
    JDK or Maven is installed."""
    libs = home / "libs"
    if any(libs.glob("kafka-clients-*.jar")):
        return True
    if not (shutil.which("javac") and shutil.which("mvn")):
        return False
    dependencies = "".join(
        f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></dependency>"
        for group, artifact, version in (c.split(":") for c in (KAFKA_CLIENTS, SLF4J_BINDING)))
    with tempfile.TemporaryDirectory(prefix="samsa-kafka-jars-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0'
                       "</modelVersion><groupId>samsa.compat</groupId><artifactId>kafka-jars"
                       f"</artifactId><version>1</version><dependencies>{dependencies}"
                       "</dependencies></project>")
        fetched = subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(pom),
                                  "dependency:copy-dependencies", f"-DoutputDirectory={libs}"],
                                 capture_output=True, text=True)
        if fetched.returncode != 0:
            raise RuntimeError(f"mvn could not fetch {KAFKA_CLIENTS}: {fetched.stdout[-2000:]}")
    return any(libs.glob("kafka-clients-*.jar"))

"""A Kafka installation directory for the peer suites, whose ``bin/`` holds stand-ins.

The suites shell out to Kafka's Java tools: librdkafka's tests through ``$KAFKA_PATH/bin``,
kafka-python's fixtures through ``$KAFKA_ROOT/bin``. This harness installs no Kafka; instead
``kafka_home(cache)`` writes ``.cache/compat/kafka-home/bin/<tool>`` scripts that run compat's
Python stand-ins (``STAND_INS``) with Samsa's interpreter, from the repository root. A tool
not listed there is missing, and a test calling it is skipped by its suite.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

# Kafka tool -> the module that stands in for it.
STAND_INS = {
    "kafka-topics.sh": "compat.kafka_topics",
    "kafka-acls.sh": "compat.kafka_acls",
    "kafka-storage.sh": "compat.kafka_storage",
}


def kafka_home(cache: Path) -> Path:
    """The directory (absolute: the suites run elsewhere) whose ``bin/`` holds the stand-ins;
    rewritten on every call, so it follows the repository it is run from."""
    home = (cache / "kafka-home").resolve()
    (home / "bin").mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parents[1]
    for tool, module in STAND_INS.items():
        script = home / "bin" / tool
        script.write_text(f"#!/bin/sh\ncd {shlex.quote(str(root))} && "
                          f"exec {shlex.quote(sys.executable)} -m {module} \"$@\"\n")
        script.chmod(0o755)
    return home

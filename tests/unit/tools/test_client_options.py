"""The options every client-side ``samsa`` command shares: ``--command-config`` (a properties
file of client configs, as Kafka's tools take it), ``-X`` and ``--bootstrap-server``."""

from __future__ import annotations

import argparse
from pathlib import Path

from tools.client_options import add_client_options, client_config


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_client_options(parser)
    return parser.parse_args(list(argv))


def test_command_config_gives_sasl_client_properties(tmp_path: Path) -> None:
    command_config = tmp_path / "sasl_command.conf"
    command_config.write_text(
        "# kafka-python's SASL fixture's file\nsecurity.protocol=SASL_PLAINTEXT\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required '
        'username="alice" password="alice-secret";\n')
    config = client_config(parse("--bootstrap-server", "localhost:1", "--command-config",
                                 str(command_config), "-X", "sasl.mechanism=PLAIN"),
                           **{"client.id": "tool"})
    assert config["security.protocol"] == "SASL_PLAINTEXT"
    assert config["sasl.mechanism"] == "PLAIN"  # -X after the file
    assert 'username="alice"' in config["sasl.jaas.config"]
    assert (config["bootstrap.servers"], config["client.id"]) == ("localhost:1", "tool")
    assert "security.protocol" not in client_config(parse("--bootstrap-server", "localhost:1"))

"""The codec generator (``protocol.codegen``) and the Kafka schemas the repository carries."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from protocol import codegen

REPOSITORY = Path(__file__).resolve().parents[3]
SCHEMAS = codegen.schema_dir(None)  # the vendored copy unless $SAMSA_KAFKA_SCHEMAS says otherwise


# ---------------------------------------------------------------- the vendored schemas


def test_the_repository_carries_kafkas_schemas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(codegen.SCHEMAS_ENV, raising=False)
    assert codegen.schema_dir(None) == codegen.DEFAULT_SCHEMAS
    assert codegen.DEFAULT_SCHEMAS == REPOSITORY / "protocol" / "schemas" / "kafka"
    counts = {
        folder: len(list((codegen.DEFAULT_SCHEMAS / folder).glob("*.json")))
        for folder in (".", "group-coordinator", "share-coordinator", "metadata")
    }
    assert counts == {".": 192, "group-coordinator": 8, "share-coordinator": 4, "metadata": 24}
    assert codegen.main(["--check", "--schemas", str(codegen.DEFAULT_SCHEMAS)]) == 0


def test_the_vendored_schemas_name_the_kafka_commit_they_come_from() -> None:
    source = (codegen.DEFAULT_SCHEMAS / "SOURCE.md").read_text(encoding="utf-8")
    assert re.search(r"\b[0-9a-f]{40}\b", source), "SOURCE.md names no Kafka commit"
    assert "4.0.0-SNAPSHOT" in source


def test_samsas_own_schemas_are_read_once_beside_the_vendored_ones() -> None:
    messages = codegen.load_messages(codegen.DEFAULT_SCHEMAS)
    own = sorted(m.source for m in messages if m.source.startswith("protocol/schemas/"))
    assert own == [
        "protocol/schemas/SamsaConditionalProduceRequest.json",
        "protocol/schemas/SamsaConditionalProduceResponse.json",
        "protocol/schemas/SamsaDescribeLogSegmentsRequest.json",
        "protocol/schemas/SamsaDescribeLogSegmentsResponse.json",
        "protocol/schemas/SamsaDescribeSharePartitionsRequest.json",
        "protocol/schemas/SamsaDescribeSharePartitionsResponse.json",
        "protocol/schemas/SamsaReadKeyRequest.json",
        "protocol/schemas/SamsaReadKeyResponse.json",
        "protocol/schemas/transaction-coordinator/TransactionLogKey.json",
        "protocol/schemas/transaction-coordinator/TransactionLogValue.json",
    ]
    assert len(messages) == 192 + 8 + 4 + 24 + len(own)


def test_the_environment_and_the_option_override_the_vendored_schemas(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(codegen.SCHEMAS_ENV, str(tmp_path))
    assert codegen.schema_dir(None) == tmp_path
    assert codegen.schema_dir("elsewhere") == Path("elsewhere")


@pytest.mark.parametrize("empty", [False, True])
def test_missing_schemas_fail_and_delete_nothing(tmp_path: Path, capsys: Any, empty: bool) -> None:
    schemas = tmp_path / "schemas"
    if empty:
        schemas.mkdir()
    copy = tmp_path / "messages"
    shutil.copytree(codegen.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = codegen.existing_files(copy)
    assert codegen.main(["--check", "--schemas", str(schemas), "--output", str(copy)]) == 1
    assert codegen.main(["--schemas", str(schemas), "--output", str(copy)]) == 1
    assert "no Kafka schemas" in capsys.readouterr().err
    assert codegen.existing_files(copy) == before


# ---------------------------------------------------------------- the generator


def test_check_passes_on_the_committed_output() -> None:
    assert codegen.main(["--check", "--schemas", str(SCHEMAS)]) == 0


def test_check_fails_after_a_generated_file_is_edited(tmp_path: Path, capsys: Any) -> None:
    copy = tmp_path / "messages"
    shutil.copytree(codegen.PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    argv = ["--check", "--schemas", str(SCHEMAS), "--output", str(copy)]
    assert codegen.main(argv) == 0
    target = copy / "produce_request.py"
    target.write_text(target.read_text() + "# an edit\n")
    (copy / "stale_request.py").write_text(codegen.GENERATED_MARKER + " by hand\n")
    assert codegen.main(argv) == 1
    output = capsys.readouterr().out
    assert "protocol/messages/produce_request.py" in output
    assert "protocol/messages/stale_request.py" in output
    assert codegen.main(["--schemas", str(SCHEMAS), "--output", str(copy)]) == 0  # regenerate
    assert codegen.main(argv) == 0 and not (copy / "stale_request.py").exists()


def test_samsa_schemas_are_generated_with_kafkas(tmp_path: Path) -> None:
    messages = {m.name: m for m in codegen.load_messages(tmp_path)}  # no Kafka schemas here
    request = messages["SamsaDescribeLogSegmentsRequest"]
    assert request.api_key == 10000 and request.source.startswith("protocol/schemas/")
    assert request.module == "samsa_describe_log_segments_request"
    assert (request.valid.low, request.valid.high, request.flexible.low) == (0, 0, 0)
    generated = codegen.render_module(request)
    assert generated.startswith(codegen.GENERATED_MARKER + " from protocol/schemas/")
    assert generated == (codegen.PACKAGE_DIR / f"{request.module}.py").read_text()


def test_a_samsa_schema_may_not_reuse_a_kafka_api_key(tmp_path: Path) -> None:
    kafka, samsa = tmp_path / "kafka", tmp_path / "samsa"
    kafka.mkdir()
    samsa.mkdir()
    schema = '{"apiKey": 0, "type": "request", "name": "%s", "validVersions": "0", "fields": []}'
    (kafka / "ProduceRequest.json").write_text(schema % "ProduceRequest")
    (samsa / "SamsaProduceRequest.json").write_text(schema % "SamsaProduceRequest")
    with pytest.raises(codegen.SchemaError, match="API key 0"):
        codegen.load_messages(kafka, samsa)


def test_check_runs_as_a_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "protocol.codegen", "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPOSITORY,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_files_are_small() -> None:
    for path in codegen.PACKAGE_DIR.rglob("*.py"):
        assert path.stat().st_size < 1 << 20, path


@pytest.mark.parametrize(
    ("name", "snake"),
    [
        ("TopicName", "topic_name"),
        ("KRaftVersion", "kraft_version"),
        ("clientId", "client_id"),
        ("isKRaftController", "is_kraft_controller"),
        ("ISR", "isr"),
    ],
)
def test_snake_case_is_kafkas(name: str, snake: str) -> None:
    assert codegen.snake_case(name) == snake


def test_comments_are_stripped_outside_strings_only() -> None:
    text = '// licence\n{ "a": "http://x", // why\n "b": 1 }'
    assert codegen.strip_comments(text) == '\n{ "a": "http://x", \n "b": 1 }'

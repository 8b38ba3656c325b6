"""``samsa storage format | random-uuid | info``: kafka-storage.sh's behaviours and messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.meta_properties import (
    META_PROPERTIES,
    MetaProperties,
    MetaPropertiesEnsemble,
    parse_uuid,
    write_meta_properties,
)
from tools.cli import main

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
OTHER_CLUSTER = "AAAAAAAAAAAAAAAAAAAAAA"
KRAFT = (
    "process.roles=broker,controller\n"
    "node.id=1\n"
    "controller.quorum.voters=1@127.0.0.1:19192\n"
    "controller.listener.names=CONTROLLER\n"
    "listeners=PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19192\n"
)


@pytest.fixture
def node(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A KRaft node's config with two log directories (the first holds the metadata log)."""
    first, second = tmp_path / "a", tmp_path / "b"
    config = tmp_path / "node.properties"
    config.write_text(KRAFT + f"log.dirs={first},{second}\n")
    return config, first, second


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_random_uuid_prints_a_kafka_uuid(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "storage", "random-uuid")
    assert code == 0 and len(parse_uuid(out.strip())) == 16


def test_format_writes_every_directory(capsys: pytest.CaptureFixture[str], node) -> None:  # type: ignore[no-untyped-def]
    config, first, second = node
    code, out, _ = run(capsys, "storage", "format", "-t", CLUSTER, "-c", str(config))
    assert code == 0
    assert out == f"Formatting metadata directory {first}.\nFormatting data directory {second}.\n"
    ensemble = MetaPropertiesEnsemble.load([first, second])
    metas = [ensemble.log_dir_props[first], ensemble.log_dir_props[second]]
    assert {(m.cluster_id, m.node_id, m.version) for m in metas} == {(CLUSTER, 1, 1)}
    assert metas[0].directory_id != metas[1].directory_id


def test_format_refuses_a_formatted_directory(capsys: pytest.CaptureFixture[str], node) -> None:  # type: ignore[no-untyped-def]
    config, first, second = node
    write_meta_properties(first, MetaProperties(CLUSTER, 1, "_a4sFRv8QjWFuqUxOyhL0g"))
    code, _, err = run(capsys, "storage", "format", "--cluster-id", CLUSTER, "--config", str(config))
    assert code == 1
    assert err == (f"samsa: error: Log directory {first} is already formatted. Use "
                   "--ignore-formatted to ignore this directory and format the others.\n")
    assert not (second / META_PROPERTIES).exists()
    code, out, _ = run(capsys, "storage", "format", "-t", CLUSTER, "-c", str(config), "-g")
    assert (code, out) == (0, f"Formatting data directory {second}.\n")
    code, out, _ = run(capsys, "storage", "format", "-t", CLUSTER, "-c", str(config),
                       "--ignore-formatted")
    assert (code, out) == (0, "All of the log directories are already formatted.\n")


@pytest.mark.parametrize(
    ("meta", "reason"),
    [
        (MetaProperties(OTHER_CLUSTER, 1), f"Expected {CLUSTER}, but read {OTHER_CLUSTER}"),
        (MetaProperties(CLUSTER, 2), "Stored node id 2 doesn't match previous node id 1"),
    ],
)
def test_format_refuses_another_cluster_or_node_even_when_ignoring_formatted(
    capsys: pytest.CaptureFixture[str], node, meta: MetaProperties, reason: str,  # type: ignore[no-untyped-def]
) -> None:
    config, first, second = node
    write_meta_properties(first, meta)
    code, _, err = run(capsys, "storage", "format", "-t", CLUSTER, "-c", str(config), "-g")
    assert code == 1 and reason in err
    assert not (second / META_PROPERTIES).exists()


@pytest.mark.parametrize(
    ("config_text", "cluster_id", "reason"),
    [
        ("log.dirs={dir}\n", CLUSTER, "Formatting is only supported for clusters in KRaft mode."),
        (KRAFT + "log.dirs={dir}\n", "not-a-uuid",
         "Cluster ID string not-a-uuid does not appear to be a valid UUID"),
        (KRAFT.replace("controller.quorum.voters=1@127.0.0.1:19192",
                       "controller.quorum.bootstrap.servers=127.0.0.1:19192") + "log.dirs={dir}\n",
         CLUSTER, "Because controller.quorum.voters is not set on this controller"),
    ],
)
def test_format_refusals(capsys: pytest.CaptureFixture[str], tmp_path: Path, config_text: str,
                         cluster_id: str, reason: str) -> None:
    config = tmp_path / "node.properties"
    config.write_text(config_text.format(dir=tmp_path / "logs"))
    code, _, err = run(capsys, "storage", "format", "-t", cluster_id, "-c", str(config))
    assert code == 1 and reason in err and err.count("\n") == 1
    assert not (tmp_path / "logs").exists()


def test_format_with_an_override(capsys: pytest.CaptureFixture[str], node, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config, _, _ = node
    elsewhere = tmp_path / "elsewhere"
    code, out, _ = run(capsys, "storage", "format", "-t", CLUSTER, "-c", str(config),
                       "--override", f"log.dirs={elsewhere}")
    assert (code, out) == (0, f"Formatting metadata directory {elsewhere}.\n")


def test_info_of_formatted_directories(capsys: pytest.CaptureFixture[str], node) -> None:  # type: ignore[no-untyped-def]
    config, first, second = node
    for directory in (first, second):
        write_meta_properties(directory, MetaProperties(CLUSTER, 1, None))
    code, out, _ = run(capsys, "storage", "info", "-c", str(config))
    assert code == 0
    assert out == (f"Found log directories:\n  {first}\n  {second}\n\n"
                   f"Found metadata: {{cluster.id={CLUSTER}, node.id=1, version=1}}\n\n")
    code, out, _ = run(capsys, "storage", "info", "-c", str(config), "--json")
    assert code == 0
    assert json.loads(out) == {
        "directories": [str(first), str(second)],
        "metadata": {"cluster.id": CLUSTER, "node.id": "1", "version": "1"},
        "problems": [],
    }


def test_info_reports_kafkas_problems(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dirs = [tmp_path / name for name in ("a", "b", "c", "d", "e", "f")]
    a, b, c, d, e, f = dirs
    write_meta_properties(a, MetaProperties(CLUSTER, 1))
    write_meta_properties(b, MetaProperties(OTHER_CLUSTER, 1))
    write_meta_properties(c, MetaProperties(CLUSTER, 2))
    d.mkdir()
    e.write_text("a file")
    config = tmp_path / "node.properties"
    config.write_text(KRAFT + "log.dirs=" + ",".join(map(str, dirs)) + "\n")
    code, out, _ = run(capsys, "storage", "info", "-c", str(config))
    assert code == 1
    assert out.endswith(
        "Found problems:\n"
        "  Mismatched cluster IDs between storage directories.\n"
        "  Mismatched node IDs between storage directories.\n"
        f"  {d} is not formatted.\n"
        f"  {e} is not a directory\n"
        f"  {f} does not exist\n\n")
    assert out.startswith(f"Found log directories:\n  {a}\n  {b}\n  {c}\n  {d}\n\n")


def test_info_reports_an_unreadable_file(capsys: pytest.CaptureFixture[str], node) -> None:  # type: ignore[no-untyped-def]
    config, first, second = node
    first.mkdir()
    (first / META_PROPERTIES).write_text("version=1\nnode.id=1\n")
    write_meta_properties(second, MetaProperties(CLUSTER, 1))
    code, out, _ = run(capsys, "storage", "info", "-c", str(config))
    assert code == 1
    path = first / META_PROPERTIES
    assert (f"  Error loading {path}: cluster.id was not specified in the v1 file: {path}\n"
            in out)

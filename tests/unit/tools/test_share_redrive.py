"""``samsa share-groups --redrive`` without a broker: where a dead letter goes, the progress
group's name, the usage errors."""

from __future__ import annotations

import pytest

from samsa.types import ConsumerRecord
from tools.cli import main
from tools.share_redrive import progress_group, redrive_target


def letter(*headers: tuple[str, bytes | None]) -> ConsumerRecord:
    return ConsumerRecord("jobs.dlq", 0, 7, 1_000, 0, b"k", b"v", headers)


DLQ_HEADERS = (("samsa.dlq.topic", b"jobs"), ("samsa.dlq.partition", b"3"), ("samsa.dlq.offset", b"41"),
               ("samsa.dlq.reason", b"rejected"))


def test_a_letter_goes_back_to_its_source_partition_without_the_dlq_headers() -> None:
    assert redrive_target(letter(("trace", b"t"), *DLQ_HEADERS, ("other", None)), None) == (
        "jobs", 3, [("trace", b"t"), ("other", None)])


def test_to_topic_overrides_the_source_and_lets_the_partitioner_choose() -> None:
    assert redrive_target(letter(*DLQ_HEADERS), "retry") == ("retry", None, [])


def test_a_record_naming_no_source_is_skipped() -> None:
    assert redrive_target(letter(("trace", b"t")), None) is None


def test_progress_group_names() -> None:
    assert progress_group("jobs.dlq", None) == "samsa-redrive.jobs.dlq"
    assert progress_group("jobs.dlq", "retry") == "samsa-redrive.jobs.dlq.to.retry"


def test_redrive_needs_a_dead_letter_topic_or_a_group(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["share-groups", "--redrive"]) == 2
    assert "--dead-letter-topic" in capsys.readouterr().err

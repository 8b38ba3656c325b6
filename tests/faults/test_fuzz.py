"""The protocol fuzzer (G12): its inputs are deterministic per seed, its mutators do what they
say, its detectors catch a silent or dead listener and steady memory growth, and a short run
against a real broker passes."""

from __future__ import annotations

import argparse
import random
import socket
import struct
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.frames import encode_request
from protocol.messages import REQUESTS
from protocol.messages.metadata_request import MetadataRequest
from protocol.messages.request_header import RequestHeader
from tests.faults import fuzz, fuzz_report
from tests.faults.fuzz_inputs import (
    MUTATORS,
    Case,
    Scene,
    Target,
    bit_flip,
    draw_case,
    draw_message,
    lying_size,
    truncate,
    unknown_api,
    wrong_version,
)

SCENE = Scene("fuzz", uuid.UUID(int=7), "fuzz-group")
PAIRS = tuple((key, version) for key in (0, 1, 3, 18, 19)
              for version in range(REQUESTS[key].MIN_VERSION, REQUESTS[key].MAX_VERSION + 1))
TARGET = Target(PAIRS)


def metadata_frame(version: int = 12) -> bytes:
    header = RequestHeader(request_api_key=3, request_api_version=version, correlation_id=42,
                           client_id="test")
    return encode_request(header, MetadataRequest(topics=None))


def size_prefix(frame: bytes) -> int:
    return int(struct.unpack_from(">i", frame)[0])


# -- inputs ---------------------------------------------------------------------------------


def test_a_case_is_a_function_of_its_seed_and_number() -> None:
    for number in range(60):
        assert draw_case(11, number, TARGET, SCENE) == draw_case(11, number, TARGET, SCENE)
    assert [draw_case(11, n, TARGET, SCENE) for n in range(20)] != \
        [draw_case(12, n, TARGET, SCENE) for n in range(20)]


def test_one_pass_covers_every_advertised_pair() -> None:
    cases = [draw_case(3, number, TARGET, SCENE) for number in range(len(PAIRS))]
    assert {(case.api_key, case.api_version) for case in cases} == set(PAIRS)


def test_the_first_cases_reach_every_api() -> None:
    api_keys = {key for key, _ in PAIRS}
    cases = [draw_case(3, number, TARGET, SCENE) for number in range(len(api_keys))]
    assert {case.api_key for case in cases} == api_keys
    assert {case.api_version for case in cases if case.api_key == 3} == {REQUESTS[3].MAX_VERSION}


def test_cases_use_every_mode_and_mutator() -> None:
    cases = [draw_case(5, number, TARGET, SCENE) for number in range(600)]
    assert {case.mode for case in cases} == {"whole", "stall", "reset"}
    assert any(len(case.frames) > 10 for case in cases)  # pipelined
    singles = {case.mutator for case in cases if len(case.frames) == 1}
    assert set(MUTATORS) - {"big_frame"} <= singles
    assert all(0 < case.cut < len(case.data) for case in cases if case.mode == "stall")


def test_a_case_survives_its_json_form() -> None:
    for number in range(30):
        case = draw_case(9, number, TARGET, SCENE)
        assert Case.from_json(case.to_json()) == case


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), version=st.sampled_from(range(0, 13)))
def test_drawn_messages_encode_at_their_version(seed: int, version: int) -> None:
    message = draw_message(random.Random(seed), 3, version)
    header = RequestHeader(request_api_key=3, request_api_version=version, correlation_id=1)
    frame = encode_request(header, message)
    assert type(REQUESTS[3].decode(memoryview(frame)[_body_offset(frame, version):], version)) \
        is type(message)


def _body_offset(frame: bytes, version: int) -> int:
    from protocol.frames import parse_request_header

    return 4 + parse_request_header(memoryview(frame)[4:])[1]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), name=st.sampled_from(sorted(MUTATORS)))
def test_every_mutator_is_deterministic_and_changes_the_frame(seed: int, name: str) -> None:
    frame = metadata_frame()
    first = MUTATORS[name](random.Random(seed), frame)
    assert first == MUTATORS[name](random.Random(seed), frame)
    assert isinstance(first, bytes) and len(first) >= 4
    if name not in ("wrong_version", "unknown_api", "wrong_correlation_id", "interesting_value"):
        assert first != frame  # these four may write the value that was there


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_bit_flips_keep_the_size_and_flip_one_to_eight_bits(seed: int) -> None:
    frame = metadata_frame()
    flipped = bit_flip(random.Random(seed), frame)
    assert len(flipped) == len(frame) and flipped[:8] == frame[:8]
    bits = sum(bin(a ^ b).count("1") for a, b in zip(frame, flipped, strict=True))
    assert 1 <= bits <= 8


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_truncation_keeps_the_size_prefix_true(seed: int) -> None:
    frame = metadata_frame()
    cut = truncate(random.Random(seed), frame)
    assert len(cut) < len(frame) and size_prefix(cut) == len(cut) - 4
    assert frame[4:].startswith(cut[4:])


def test_header_mutators_touch_only_their_field() -> None:
    frame = metadata_frame()
    for seed in range(20):
        versioned = wrong_version(random.Random(seed), frame)
        assert versioned[:6] == frame[:6] and versioned[8:] == frame[8:]
        keyed = unknown_api(random.Random(seed), frame)
        assert keyed[:4] + keyed[6:] == frame[:4] + frame[6:]
        assert struct.unpack_from(">h", keyed, 4)[0] not in (0, 1, 3, 18)
        lied = lying_size(random.Random(seed), frame)
        assert lied[4:] == frame[4:] and size_prefix(lied) != len(frame) - 4


def test_incomplete_tells_a_frame_still_waiting_for_bytes() -> None:
    frame = metadata_frame()
    assert not fuzz.incomplete(frame + frame)
    assert fuzz.incomplete(frame + frame[:3])  # a size prefix cut short
    assert fuzz.incomplete(frame[:-1])
    assert fuzz.incomplete(struct.pack(">i", len(frame)) + frame[4:])  # claims 4 bytes more
    assert not fuzz.incomplete(struct.pack(">i", -1) + frame[4:])  # refused at once


# -- memory ---------------------------------------------------------------------------------


def series(values: list[int]) -> list[tuple[float, int]]:
    return [(float(i), kb) for i, kb in enumerate(values)]


def test_a_plateau_after_warm_up_is_bounded() -> None:
    noisy = [40_000 + 3_000 * (i % 7) for i in range(200)]
    verdict = fuzz_report.judge_memory(series([10_000] * 40 + noisy), max_rss_kb=1 << 20)
    assert verdict.ok and verdict.max_kb == 58_000


def test_steady_growth_fails_and_a_rise_then_fall_does_not() -> None:
    growing = [50_000 + 1_000 * i for i in range(200)]
    verdict = fuzz_report.judge_memory(series(growing), max_rss_kb=1 << 30)
    assert not verdict.ok and "steadily" in verdict.reason and verdict.growth_kb > 16 * 1024
    hump = [50_000 + 1_000 * min(i, 200 - i) for i in range(200)]
    assert fuzz_report.judge_memory(series(hump), max_rss_kb=1 << 30).ok


def test_rss_above_the_bound_fails() -> None:
    verdict = fuzz_report.judge_memory(series([10_000, 20_000, 15_000]), max_rss_kb=18_000)
    assert not verdict.ok and verdict.max_kb == 20_000


def test_rss_is_read_from_proc() -> None:
    import os

    assert fuzz_report.rss_kb(os.getpid()) > 1000
    assert fuzz_report.rss_kb(2**22 + 12345) == 0  # no such process


# -- the detectors, against listeners that misbehave on purpose ------------------------------


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, list[socket.socket]]]:
    """A loopback listener whose accepted connections are kept open and never answered."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server, accepted
    server.close()
    for sock in accepted:
        sock.close()


def endpoint_of(server: socket.socket) -> fuzz.Endpoint:
    host, port = server.getsockname()
    return fuzz.Endpoint("node-1 client", host, port, process=None)


def test_a_listener_that_never_answers_is_a_hang_and_a_silent_case(listener) -> None:  # type: ignore[no-untyped-def]
    server, _ = listener
    endpoint = endpoint_of(server)
    assert fuzz.probe(endpoint, timeout_s=0.3) is not None
    case = Case(1, 3, 12, "none", "default", (metadata_frame(),))
    outcome = fuzz.exchange(endpoint, case, timeout_s=0.3)
    assert outcome.silent and not outcome.incomplete and outcome.answers == 0


def test_a_closed_port_fails_the_probe() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    endpoint = endpoint_of(server)
    server.close()
    assert "Refused" in (fuzz.probe(endpoint, timeout_s=1) or "")


# -- against a real broker -----------------------------------------------------------------


@pytest.mark.integration
def test_a_short_fixed_seed_run_passes_and_covers_every_api(tmp_path: Path) -> None:
    args = fuzz.parse(["--seed", "12", "--minutes", "0.35", "--work-dir", str(tmp_path),
                       "--json", str(tmp_path / "summary.json")])
    summary = fuzz.run(args, fuzz.Console(quiet=True))
    assert summary["ok"], summary["failures"]
    assert summary["cases"] > 100 and summary["frames"] > summary["cases"]
    assert len(summary["by_api"]) == summary["apis_advertised"] > 40  # a pass takes ~50 cases
    rows = summary["by_api"].values()
    assert sum(row.get("answered", 0) for row in rows) > 20
    assert sum(row.get("closed", 0) for row in rows) > 20
    assert sum(row.get("stall", 0) + row.get("reset", 0) for row in rows) > 5
    (memory,) = summary["memory"].values()
    assert memory["ok"] and memory["samples"] > 10
    assert 0 < summary["slowest_probe_s"] < args.probe_timeout
    assert len(summary["rss_kb_by_minute"]["broker"]) == 1
    replay_a_saved_case(tmp_path)


def replay_a_saved_case(tmp_path: Path) -> None:
    """--replay plays a saved file's cases and judges them like a run."""
    saved = tmp_path / "saved.json"
    case = draw_case(12, 3, Target(((3, 12),)), SCENE)
    import json

    saved.write_text(json.dumps({"endpoint": "node-1 client", "cases": [case.to_json()]}))
    args = fuzz.parse(["--replay", str(saved), "--work-dir", str(tmp_path)])
    summary = fuzz.run(args, fuzz.Console(quiet=True))
    assert summary["ok"] and summary["cases"] == 1, summary
    assert isinstance(args, argparse.Namespace)


def test_logged_tracebacks_are_counted_by_their_last_line(tmp_path: Path) -> None:
    log = tmp_path / "broker.log"
    log.write_text("INFO started\nTraceback (most recent call last):\n  File \"x.py\", line 1\n"
                   "    boom()\nValueError: boom\nWARNING closing\n"
                   "Traceback (most recent call last):\n  File \"y.py\", line 2\nValueError: boom\n")
    assert fuzz_report.logged_tracebacks([log.read_text()]) == {"ValueError: boom": 2}


def test_an_answer_after_the_timeout_is_late_not_silent() -> None:
    server = socket.create_server(("127.0.0.1", 0))

    def answer_slowly() -> None:
        connection = server.accept()[0]
        with connection:
            connection.recv(1 << 16)
            threading.Event().wait(0.6)
            connection.sendall(struct.pack(">ii", 4, fuzz.SENTINEL_CORRELATION_ID))
            connection.recv(1)

    threading.Thread(target=answer_slowly, daemon=True).start()
    case = Case(1, 3, 12, "none", "default", (metadata_frame(),))
    try:
        outcome = fuzz.exchange(endpoint_of(server), case, timeout_s=0.2, patience_s=5)
    finally:
        server.close()
    assert outcome.late and not outcome.silent and not outcome.closed


def test_the_growth_the_first_ten_minute_run_showed_fails() -> None:
    """Seed 2026 before the controller's bound: 57 -> 104 MiB in 10 min, one sample a second
    or so (a CreateTopics of 2^27 partitions being planned)."""
    samples = [57_000 + 78 * i for i in range(600)]
    verdict = fuzz_report.judge_memory(series(samples), max_rss_kb=1 << 20)
    assert not verdict.ok and "steadily" in verdict.reason

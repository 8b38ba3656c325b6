"""G12, protocol fuzzing: mutated requests of every API against real Samsa nodes.

``python -m tests.faults.fuzz --seed N --minutes M [--brokers 3] [--json FILE]`` starts a node
(or a 3-node KRaft cluster: every node's client and controller listeners are fuzzed), reads
which (API, version) pairs each listener advertises (ApiVersions v3) and then, until time is
up, plays cases drawn from the seed (``tests.faults.fuzz_inputs``: valid, default or drawn
requests, mutated; pipelined; cut and stalled; reset). ``--replay FILE`` replays a saved
failure against fresh nodes.

What is checked, and how a failure is told apart:

- answer or close: after a case's frames the connection gets a valid ApiVersions v0 (the
  *sentinel*); responses come in request order, so its answer means every earlier request was
  answered or needed none (acks=0). A case is ``answered``, ``closed`` (EOF or reset by the
  broker) or ``silent`` (neither within ``--answer-timeout``, then ``--patience`` more: an
  answer in that second chance is counted ``late``; this host is shared, and a stall of every
  process under memory pressure once held a broker 15 s). Silence is legitimate only while a
  frame is incomplete (a size prefix that claims more bytes than were sent); any other silent
  case is saved (``silent-*.json``) and fails the run (it goes on);
- no hang: a fresh connection must get ApiVersions and Metadata answered within
  ``--probe-timeout`` (or, counted as a late probe, ``--patience``) after every
  ``PROBE_EVERY`` cases, after every close or silence, and while a stalled case holds its
  half-written frame; the slowest probe is reported;
- no crash: every node process stays alive; the cases since the last good probe are saved
  (``crash-*.json``), and the run stops;
- memory bounded: each node's VmRSS (``/proc/<pid>/status``) is sampled at every probe;
  the run fails when it exceeds ``--max-rss-mb`` or grows steadily (:func:`judge_memory`);
- a clean end: every node must then stop on SIGTERM with exit code 0.

State: one thread, blocking sockets, one connection per case (plus the probes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import struct
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from protocol.frames import encode_request
from protocol.messages import REQUESTS, RESPONSES, response_header_version
from protocol.messages.api_versions_request import ApiVersionsRequest
from protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from protocol.messages.request_header import RequestHeader
from protocol.messages.response_header import ResponseHeader
from tests.faults.fuzz_inputs import Case, Scene, Target, draw_case
from tests.faults.fuzz_report import (
    by_minute,
    judge_memory,
    logged_tracebacks,
    print_summary,
    rss_kb,
)

__all__ = ["Endpoint", "Outcome", "exchange", "main", "probe"]

TOPIC, GROUP = "fuzz", "fuzz-group"
PROBE_EVERY = 20
SENTINEL_CORRELATION_ID = 0x5E471E1
BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
SILENT_SAMPLES_KEPT = 20
UNKNOWN_SERVER_ERROR = -1


@dataclass
class Endpoint:
    """One listener of one node process."""

    name: str
    host: str
    port: int
    process: Any  # tests.integration.conftest.BrokerProcess
    target: Target | None = None


@dataclass(frozen=True)
class Outcome:
    answers: int
    closed: bool
    silent: bool
    incomplete: bool  # a frame still waits for bytes that were never sent
    error_answers: int = 0
    undecodable: int = 0
    unknown_server_errors: int = 0
    late: bool = False  # answered, but only after the answer timeout


# -- one connection -------------------------------------------------------------------------


def _connect(endpoint: Endpoint, timeout_s: float) -> socket.socket:
    sock = socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(min(count - len(data), 1 << 20))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> bytes | None:
    size = _read_exactly(sock, 4)
    return None if size is None else _read_exactly(sock, struct.unpack(">i", size)[0])


def sentinel() -> bytes:
    header = RequestHeader(request_api_key=18, request_api_version=0,
                           correlation_id=SENTINEL_CORRELATION_ID, client_id="fuzz-sentinel")
    return encode_request(header, ApiVersionsRequest())


def incomplete(data: bytes) -> bool:
    """Whether ``data``'s frames (as the broker splits them) end inside a frame."""
    offset = 0
    while offset < len(data):
        if len(data) - offset < 4:
            return True
        size = struct.unpack_from(">i", data, offset)[0]
        if size < 0:
            return False  # the broker closes at once
        offset += 4 + size
    return offset > len(data)


def exchange(endpoint: Endpoint, case: Case, timeout_s: float, patience_s: float = 0) -> Outcome:
    """Play ``case`` on a new connection; what came back (see ``_answers``)."""
    sock = _connect(endpoint, timeout_s)
    try:
        if case.mode == "reset":
            _send(sock, case.data)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return Outcome(0, False, False, False)
        if case.mode == "stall":
            _send(sock, case.data[: case.cut])
            return Outcome(0, False, False, True)  # the caller probes, then closes
        data = case.data + sentinel()
        _send(sock, data)
        return _answers(sock, case, incomplete(data), patience_s)
    finally:
        if case.mode != "stall":
            sock.close()


def _send(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(data)  # the broker may close it half way: the reading says so


def _answers(sock: socket.socket, case: Case, is_incomplete: bool, patience_s: float) -> Outcome:
    """Read answers up to the sentinel's. A complete input not answered in time gets
    ``patience_s`` more (a host that stalls every process, not the broker, is not a silence);
    an answer that needed it is ``late``."""
    answers = error_answers = undecodable = unknown = 0
    late = False

    def outcome(closed: bool, silent: bool, still_incomplete: bool) -> Outcome:
        return Outcome(answers, closed, silent, still_incomplete, error_answers, undecodable,
                       unknown, late)

    while True:
        try:
            frame = _read_frame(sock)
        except TimeoutError:
            if is_incomplete or late or patience_s <= 0:
                return outcome(False, True, is_incomplete)
            late = True
            sock.settimeout(patience_s)
            continue
        except ConnectionResetError:
            frame = None
        if frame is None:
            return outcome(True, False, is_incomplete)
        if struct.unpack_from(">i", frame)[0] == SENTINEL_CORRELATION_ID:
            return outcome(False, False, False)
        answers += 1
        if answers == 1 and len(case.frames) == 1:
            codes = _error_codes_of(case.frames[0], frame)
            error_answers += codes is not None and any(codes)
            undecodable += codes is None
            unknown += codes is not None and UNKNOWN_SERVER_ERROR in codes


def _error_codes_of(request: bytes, response: bytes) -> list[int] | None:
    """Every error code of ``response``, decoded as the answer to ``request``'s header (None if
    it does not decode; [] when the request's header names no API and version we know)."""
    if len(request) < 8:
        return []
    api_key, version = struct.unpack_from(">hh", request, 4)
    if api_key not in RESPONSES or not REQUESTS[api_key].MIN_VERSION <= version <= \
            REQUESTS[api_key].MAX_VERSION:
        return []
    try:
        _, offset = ResponseHeader.decode_from(memoryview(response), 0,
                                               response_header_version(api_key, version))
        return _walk_codes(RESPONSES[api_key].decode(memoryview(response)[offset:], version))
    except Exception:
        if api_key == 18:  # an unsupported ApiVersions version gets a v0 answer (KIP-511)
            return []
        return None


def _walk_codes(message: Any) -> list[int]:
    if isinstance(message, list):
        return [code for element in message for code in _walk_codes(element)]
    if not is_dataclass(message):
        return []
    codes: list[int] = []
    for each in fields(message):
        value = getattr(message, each.name)
        if each.name.endswith("error_code") and isinstance(value, int):
            codes.append(value)
        elif isinstance(value, list) or is_dataclass(value):
            codes += _walk_codes(value)
    return codes


def call(sock: socket.socket, api_key: int, version: int, request: Any) -> Any:
    header = RequestHeader(request_api_key=api_key, request_api_version=version,
                           correlation_id=1, client_id="fuzz")
    sock.sendall(encode_request(header, request))
    frame = _read_frame(sock)
    if frame is None:
        raise ConnectionError("closed by the broker")
    _, offset = ResponseHeader.decode_from(memoryview(frame), 0,
                                           response_header_version(api_key, version))
    return RESPONSES[api_key].decode(memoryview(frame)[offset:], version)


def probe(endpoint: Endpoint, timeout_s: float) -> str | None:
    """None if a fresh connection gets ApiVersions (and, on a broker listener, Metadata)
    answered within ``timeout_s``; else what went wrong."""
    deadline = time.monotonic() + timeout_s
    try:
        with _connect(endpoint, timeout_s) as sock:
            if call(sock, 18, 0, ApiVersionsRequest()).error_code != 0:
                return "ApiVersions answered with an error"
            if endpoint.name.endswith("client"):
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                call(sock, 3, 1, MetadataRequest(topics=None))
    except (OSError, ConnectionError) as error:
        return f"{type(error).__name__}: {error}"
    return None


# -- setting up ----------------------------------------------------------------------------


def advertised(endpoint: Endpoint) -> tuple[tuple[int, int], ...]:
    with _connect(endpoint, 10) as sock:
        response = call(sock, 18, 3, ApiVersionsRequest(client_software_name="samsa-fuzz",
                                                        client_software_version="1"))
    return tuple((api.api_key, version) for api in response.api_keys
                 for version in range(api.min_version, api.max_version + 1))


def create_scene(endpoint: Endpoint, replication_factor: int) -> Scene:
    deadline = time.monotonic() + 60
    with _connect(endpoint, 10) as sock:
        while True:
            created = call(sock, 19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[
                CreatableTopic(name=TOPIC, num_partitions=2, replication_factor=replication_factor)]))
            if created.topics[0].error_code in (0, 36):  # created, or TOPIC_ALREADY_EXISTS
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"cannot create {TOPIC}: {created}")
            time.sleep(0.2)  # a cluster still electing its controller
        described = call(sock, 3, 12, MetadataRequest(topics=[MetadataRequestTopic(name=TOPIC)]))
    return Scene(TOPIC, described.topics[0].topic_id, GROUP)


@dataclass
class Nodes:
    """The node processes under test and their listeners."""

    root: Path
    size: int
    processes: list[Any] = field(default_factory=list)
    endpoints: list[Endpoint] = field(default_factory=list)

    def start(self) -> Nodes:
        if self.size == 1:
            from tests.integration.conftest import BrokerProcess

            node = BrokerProcess(self.root / "logs", dict(BROKER_OVERRIDES), self.root / "broker.log")
            self.processes = [node.start()]
            self.endpoints = [Endpoint("node-1 client", node.host, node.port, node)]
            return self
        from tests.integration.cluster_nodes import ClusterNodes

        cluster = ClusterNodes(self.root, self.size, dict(BROKER_OVERRIDES)).start_all()
        for node_id, node in cluster.nodes.items():
            self.processes.append(node)
            self.endpoints.append(Endpoint(f"node-{node_id} client", "127.0.0.1",
                                           cluster.client_ports[node_id], node))
            self.endpoints.append(Endpoint(f"node-{node_id} controller", "127.0.0.1",
                                           cluster.controller_ports[node_id], node))
        return self

    def dead(self) -> list[Any]:
        return [process for process in self.processes if not process.alive()]

    def stop(self) -> list[int]:
        return [process.stop() for process in self.processes if process.alive()]

    def log_tail(self, chars: int = 4000) -> str:
        return "\n".join(f"--- {process.stderr_path.name} ---\n{process.log()[-chars:]}"
                         for process in self.processes)


def prepare(nodes: Nodes) -> Scene:
    from tests.integration.valid_requests import VALID_REQUESTS

    valid = {api_key: build for api_key, (build, _check) in VALID_REQUESTS.items()}
    scene = create_scene(nodes.endpoints[0], min(3, nodes.size))
    for endpoint in nodes.endpoints:
        endpoint.target = Target(advertised(endpoint), valid)
    return scene


# -- the run --------------------------------------------------------------------------------


@dataclass
class Tally:
    by_api: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    cases: int = 0
    frames: int = 0
    silent_saved: int = 0
    slowest_probe_s: float = 0.0  # how long a fresh connection waited for its answers, at worst
    late_probes: int = 0  # probes that needed their second chance
    rss: dict[str, list[tuple[float, int]]] = field(default_factory=lambda: defaultdict(list))
    failures: list[dict[str, Any]] = field(default_factory=list)

    def count(self, case: Case, outcome: Outcome) -> None:
        self.cases += 1
        self.frames += len(case.frames)
        row = self.by_api[case.api_key]
        row["cases"] += 1
        row["frames"] += len(case.frames)
        row[_kind(case, outcome)] += 1
        row["late"] += outcome.late
        row["error answers"] += outcome.error_answers
        row["undecodable"] += outcome.undecodable
        row["unknown server errors"] += outcome.unknown_server_errors


def _kind(case: Case, outcome: Outcome) -> str:
    """The summary column a case counts in: its mode if it read nothing, else what happened."""
    if case.mode != "whole":
        return case.mode
    if outcome.answers or not (outcome.closed or outcome.silent):
        return "answered"
    return "closed" if outcome.closed else "silent"


@dataclass
class Run:
    seed: int
    nodes: Nodes
    scene: Scene
    out_dir: Path
    answer_timeout_s: float = 5.0
    probe_timeout_s: float = 10.0
    patience_s: float = 60.0
    tally: Tally = field(default_factory=Tally)
    window: list[Case] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def play(self, number: int) -> bool:
        """Case ``number``; False once the run must stop (a crash or a hang)."""
        endpoint = self.nodes.endpoints[number % len(self.nodes.endpoints)]
        assert endpoint.target is not None
        case = draw_case(self.seed, number, endpoint.target, self.scene,
                         turn=number // len(self.nodes.endpoints))
        self.window.append(case)
        try:
            outcome = self._exchange(endpoint, case)
        except OSError as error:  # refused: the listener is gone
            return self._fail("crash" if self.nodes.dead() else "hang", f"{endpoint.name}: {error}")
        self.tally.count(case, outcome)
        if outcome.silent and not outcome.incomplete:
            self._save_silent(endpoint, case)
        if self.nodes.dead():
            return self._fail("crash", "a node process died")
        if outcome.closed or outcome.silent or number % PROBE_EVERY == 0:
            self.check()
        return self.ok()

    def ok(self) -> bool:
        """No crash, hang or memory failure so far (silent cases are counted, not fatal)."""
        return all(failure["kind"] == "silent" for failure in self.tally.failures)

    def _exchange(self, endpoint: Endpoint, case: Case) -> Outcome:
        if case.mode != "stall":
            return exchange(endpoint, case, self.answer_timeout_s, self.patience_s)
        sock = _connect(endpoint, self.answer_timeout_s)
        try:
            _send(sock, case.data[: case.cut])
            time.sleep(case.stall_s)  # the stall itself is the fault: a half-written frame
            trouble = self._probe(endpoint)
        finally:
            sock.close()
        if trouble is not None:
            self._fail("hang", f"{endpoint.name} while a frame was half written: {trouble}")
        return Outcome(0, False, False, True)

    def check(self) -> bool:
        """Probe every listener and sample every node's RSS; False on a hang."""
        now = time.monotonic() - self.started
        for endpoint in self.nodes.endpoints:
            trouble = self._probe(endpoint)
            if trouble is not None:
                return self._fail("crash" if self.nodes.dead() else "hang",
                                  f"{endpoint.name}: {trouble}")
        for process in self.nodes.processes:
            self.tally.rss[process.stderr_path.stem].append((now, rss_kb(process.process.pid)))
        self.window.clear()
        return self.ok()

    def _probe(self, endpoint: Endpoint) -> str | None:
        """``probe``; one not answered in time gets a second chance of ``patience_s`` (counted
        as a late probe): a hang is a listener that stays silent that long."""
        started = time.monotonic()
        trouble = probe(endpoint, self.probe_timeout_s)
        if trouble is not None and self.patience_s > 0 and not self.nodes.dead():
            self.tally.late_probes += 1
            trouble = probe(endpoint, self.patience_s)
        self.tally.slowest_probe_s = max(self.tally.slowest_probe_s, time.monotonic() - started)
        return trouble

    def _fail(self, kind: str, reason: str) -> bool:
        path = self.out_dir / f"{kind}-seed{self.seed}-case{self.window[-1].number}.json"
        self._save(path, kind, reason, self.window)
        self.tally.failures.append({"kind": kind, "reason": reason, "file": str(path)})
        return False

    def _save_silent(self, endpoint: Endpoint, case: Case) -> None:
        self.tally.failures.append({"kind": "silent", "reason": f"{endpoint.name}: case "
                                    f"{case.number} neither answered nor closed",
                                    "file": str(self._silent_path(case))})
        if self.tally.silent_saved < SILENT_SAMPLES_KEPT:
            self.tally.silent_saved += 1
            self._save(self._silent_path(case), "silent", endpoint.name, [case])

    def _silent_path(self, case: Case) -> Path:
        return self.out_dir / f"silent-seed{self.seed}-case{case.number}.json"

    def _save(self, path: Path, kind: str, reason: str, cases: list[Case]) -> None:
        endpoint = self.nodes.endpoints[cases[-1].number % len(self.nodes.endpoints)]
        path.write_text(json.dumps({
            "kind": kind, "reason": reason, "seed": self.seed, "brokers": self.nodes.size,
            "endpoint": endpoint.name, "cases": [case.to_json() for case in cases],
            "host_pressure": host_pressure(),
            "log_tail": self.nodes.log_tail()}, indent=1))


def host_pressure() -> dict[str, str]:
    """The host's pressure stall information (``/proc/pressure``) when a failure is saved: a
    broker stalled with every other process is the host's doing, not the broker's."""
    found = {}
    for kind in ("cpu", "memory", "io"):
        with contextlib.suppress(OSError):
            found[kind] = Path(f"/proc/pressure/{kind}").read_text()
    return found


def run(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"samsa-fuzz-{args.seed}-", dir=args.work_dir))
    out_dir = Path(args.out_dir) if args.out_dir else root
    out_dir.mkdir(parents=True, exist_ok=True)
    nodes = Nodes(root, args.brokers).start()
    try:
        scene = prepare(nodes)
        fuzz = Run(args.seed, nodes, scene, out_dir, args.answer_timeout, args.probe_timeout,
                   args.patience)
        if args.replay:
            replay(fuzz, json.loads(Path(args.replay).read_text()))
        else:
            loop(fuzz, args.minutes * 60, console)
    finally:
        codes = nodes.stop()
    return summarize(fuzz, args, codes, root)


def loop(fuzz: Run, seconds: float, console: Console) -> None:
    columns = [TextColumn("[bold]G12 fuzz"), BarColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[status]}")]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task("fuzz", total=seconds, status="")
        number = 0
        while time.monotonic() - fuzz.started < seconds:
            number += 1
            if not fuzz.play(number):
                break
            if number % 10 == 0:
                progress.update(task, completed=time.monotonic() - fuzz.started,
                                status=_status(fuzz))
        fuzz.check()
        progress.update(task, completed=seconds, status=_status(fuzz))


def _status(fuzz: Run) -> str:
    rss = max((kb for samples in fuzz.tally.rss.values() for _, kb in samples), default=0)
    elapsed = max(time.monotonic() - fuzz.started, 1e-3)
    return (f"{fuzz.tally.cases} cases ({fuzz.tally.cases / elapsed:.0f}/s), "
            f"{fuzz.tally.frames} frames, max RSS {rss / 1024:.0f} MiB, "
            f"{len(fuzz.tally.failures)} failures")


def replay(fuzz: Run, saved: dict[str, Any]) -> None:
    """Play a saved failure's cases, in order, on its endpoint; probe after each."""
    endpoint = next((e for e in fuzz.nodes.endpoints if e.name == saved["endpoint"]),
                    fuzz.nodes.endpoints[0])
    for data in saved["cases"]:
        case = Case.from_json(data)
        fuzz.window.append(case)
        outcome = fuzz._exchange(endpoint, case)
        fuzz.tally.count(case, outcome)
        if outcome.silent and not outcome.incomplete:
            fuzz._save_silent(endpoint, case)
        if fuzz.nodes.dead():
            fuzz._fail("crash", "a node process died")
            return
        if not fuzz.check():
            return


def summarize(fuzz: Run, args: argparse.Namespace, codes: list[int], root: Path) -> dict[str, Any]:
    memory = {name: judge_memory(samples, max_rss_kb=args.max_rss_mb * 1024)
              for name, samples in fuzz.tally.rss.items()}
    failures = list(fuzz.tally.failures)
    failures += [{"kind": "memory", "reason": f"{name}: {verdict.reason}"}
                 for name, verdict in memory.items() if not verdict.ok]
    if any(code != 0 for code in codes):
        failures.append({"kind": "shutdown", "reason": f"exit codes {codes}"})
    return {"seed": fuzz.seed, "brokers": fuzz.nodes.size, "minutes": args.minutes,
            "seconds": round(time.monotonic() - fuzz.started, 1), "cases": fuzz.tally.cases,
            "frames": fuzz.tally.frames, "slowest_probe_s": round(fuzz.tally.slowest_probe_s, 3),
            "late_probes": fuzz.tally.late_probes,
            "apis_advertised": len({
                key for e in fuzz.nodes.endpoints for key, _ in (e.target.pairs if e.target else ())}),
            "by_api": {str(REQUESTS[k].__name__ if k in REQUESTS
                                                        else k): dict(v) for k, v in
                                                    sorted(fuzz.tally.by_api.items())},
            "memory": {name: asdict(verdict) for name, verdict in memory.items()},
            "rss_kb_by_minute": {name: by_minute(samples) for name, samples in fuzz.tally.rss.items()},
            "failures": failures, "ok": not failures, "work_dir": str(root),
            "logged_tracebacks": logged_tracebacks(process.log() for process in fuzz.nodes.processes)}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.fuzz", description=__doc__.split(
        "\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--brokers", type=int, default=1, choices=(1, 3))
    parser.add_argument("--json", help="write the summary as JSON to this file")
    parser.add_argument("--replay", help="replay a saved failure file")
    parser.add_argument("--max-rss-mb", type=int, default=1024)
    parser.add_argument("--answer-timeout", type=float, default=5.0)
    parser.add_argument("--probe-timeout", type=float, default=10.0)
    parser.add_argument("--patience", type=float, default=60.0,
                        help="a second chance for a late answer or probe before it is a silence "
                             "or a hang (a loaded host stalls every process; 0: none)")
    parser.add_argument("--work-dir", help="where node data goes (default: the temp dir)")
    parser.add_argument("--out-dir", help="where failure files go (default: the work dir)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    console = Console(stderr=True)
    summary = run(args, console)
    print_summary(summary, Console(width=max(Console().width, 132)))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())

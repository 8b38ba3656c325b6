"""The pytest plugin of ``samsa.testing`` (registered by ``pip install samsa``): real brokers as
fixtures.

Fixtures:
- ``samsa_broker``: one running Samsa broker (``samsa.testing.Broker``): ``.bootstrap`` for any
  Kafka client, ``.create_topic``, ``.produce``, ``.read``, ``.kill``/``.restart``/``.pause``.
- ``samsa_cluster``: three KRaft nodes (``samsa.testing.Cluster``): ``.bootstrap``,
  ``.kill(node)``, ``.pause(node)``, ``.resume(node)``, ``.restart(node)``, ``.leader(topic)``.
- ``samsa_broker_factory`` / ``samsa_cluster_factory``: start more, with settings of their own
  (``samsa_broker_factory({"log.retention.ms": "1000"})``), each stopped at the end of the test.

Scope: ``samsa_broker`` and ``samsa_cluster`` are function-scoped (a fresh broker per test)
unless the ini option ``samsa_scope`` says ``module``, ``package`` or ``session`` (one broker
shared by the tests in that scope: each test should then use topics of its own). The ini option
``samsa_config`` holds broker settings, one ``key=value`` a line, for every broker the fixtures
start. A broker's data and log live in a pytest temporary directory (its ``broker.log`` is
kept with the test's other files). At teardown each broker is stopped with SIGTERM and a
non-zero exit fails the test that owned it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from samsa.testing.nodes import Broker, BrokerStopError, Cluster

SCOPES = ("function", "class", "module", "package", "session")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("samsa_scope", "scope of the samsa_broker and samsa_cluster fixtures: "
                  "function (default), class, module, package or session", default="function")
    parser.addini("samsa_config", "broker settings (key=value, one a line) for every broker "
                  "samsa.testing's fixtures start", type="linelist", default=[])


def _scope(fixture_name: str, config: pytest.Config) -> Any:
    scope = str(config.getini("samsa_scope")).strip() or "function"
    if scope not in SCOPES:
        raise pytest.UsageError(f"samsa_scope = {scope!r}: expected one of {', '.join(SCOPES)}")
    return scope


def _settings(config: pytest.Config) -> dict[str, str]:
    settings: dict[str, str] = {}
    for line in config.getini("samsa_config"):
        key, separator, value = str(line).partition("=")
        if not separator or not key.strip():
            raise pytest.UsageError(f"samsa_config line {line!r}: expected key=value")
        settings[key.strip()] = value.strip()
    return settings


def _stop_all(started: list[Broker] | list[Cluster]) -> None:
    failures = []
    for item in started:
        if isinstance(item, Cluster):
            codes = item.stop()
            failures += [f"node {node_id} exited with {code}" for node_id, code in codes.items()
                         if code != 0]
        elif item.alive:
            code = item.stop()
            if code != 0:
                failures.append(f"the broker on {item.bootstrap} exited with {code}; its log "
                                f"ends:\n{item.log_tail()}")
    if failures:
        raise BrokerStopError("; ".join(failures))


@pytest.fixture(scope=_scope)
def samsa_broker_factory(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
                         ) -> Iterator[Callable[..., Broker]]:
    """``start(config=None)``: a new running broker with ``config`` over ``samsa_config``."""
    started: list[Broker] = []
    defaults = _settings(request.config)

    def start(config: Mapping[str, str] | None = None) -> Broker:
        directory = tmp_path_factory.mktemp("samsa-broker")
        broker = Broker(directory, {**defaults, **(config or {})})
        started.append(broker)
        return broker.start()

    yield start
    _stop_all(started)


@pytest.fixture(scope=_scope)
def samsa_broker(samsa_broker_factory: Callable[..., Broker]) -> Broker:
    """One running Samsa broker; ``.bootstrap`` is its ``host:port``."""
    return samsa_broker_factory()


@pytest.fixture(scope=_scope)
def samsa_cluster_factory(request: pytest.FixtureRequest,
                          tmp_path_factory: pytest.TempPathFactory
                          ) -> Iterator[Callable[..., Cluster]]:
    """``start(size=3, config=None)``: a new running KRaft cluster."""
    started: list[Cluster] = []
    defaults = _settings(request.config)

    def start(size: int = 3, config: Mapping[str, str] | None = None) -> Cluster:
        cluster = Cluster(tmp_path_factory.mktemp("samsa-cluster"), size,
                          {**defaults, **(config or {})})
        started.append(cluster)
        return cluster.start()

    yield start
    _stop_all(started)


@pytest.fixture(scope=_scope)
def samsa_cluster(samsa_cluster_factory: Callable[..., Cluster]) -> Cluster:
    """Three running KRaft nodes (ids 1–3); ``.bootstrap`` names them all."""
    return samsa_cluster_factory()

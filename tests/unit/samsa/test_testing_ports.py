"""``samsa.testing.ports.free_ports``: below the ephemeral range, and under pytest-xdist each
worker in a slice of its own."""

from __future__ import annotations

import pytest

from samsa.testing import ports


def test_ports_are_distinct_and_below_the_ephemeral_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    chosen = ports.free_ports(8)
    assert len(set(chosen)) == 8
    assert all(ports.PORTS_BELOW_FROM <= port < ports._ephemeral_low() for port in chosen)


@pytest.mark.parametrize("worker", [0, 1, 2])
def test_each_xdist_worker_picks_in_its_own_slice(monkeypatch: pytest.MonkeyPatch,
                                                  worker: int) -> None:
    low, workers = ports._ephemeral_low(), 3
    share = (low - ports.PORTS_BELOW_FROM) // workers
    monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{worker}")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", str(workers))
    first = ports.PORTS_BELOW_FROM + worker * share
    for _ in range(20):
        assert all(first <= port < first + share for port in ports.free_ports(4))


def test_a_worker_name_it_does_not_know_leaves_the_whole_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "master")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    assert ports._worker_share(10_000, 1000) == (10_000, 1000)

"""How ``make test`` shares the suite among pytest-xdist workers (``-n 3``).

A test module runs whole on one worker, so its module-scoped fixtures (an Apache Kafka node, a
cluster) start once and a module's last test can look back at the ones before it; the Spark
tests all run on one worker, so only one SparkSession (a JVM with a 1 GiB driver) starts.
(A scheduler of our own rather than ``--dist loadgroup`` and marks: xdist 3.8 groups by
rewriting ``item._nodeid``, which pytest 9.2 no longer reads.) Without ``-n`` nothing changes.
"""

from __future__ import annotations

from typing import Any

import pytest

SPARK_TESTS = "tests/integration/spark/"


def scope_of(nodeid: str) -> str:
    """The unit a worker runs whole: the test's file, or every Spark test together."""
    path = nodeid.split("::", 1)[0]
    return "spark" if path.startswith(SPARK_TESTS) else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return ByModule(config, log)

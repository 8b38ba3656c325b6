"""A pytest plugin (``-p samsa_skips``) that skips the kafka-python tests ``compat/skips.py``
tolerates on this run.

``compat.kafka_python_suite`` checks the reviewed table against the running broker and writes
the entries that apply to the JSON file named by ``SAMSA_COMPAT_SKIPS`` (``{test: reason}``,
tests named as the suite reads them from the JUnit file: ``module_or_class::test``). Skipping
(rather than deselecting) keeps them in the counts with their reason. A test this plugin does
not skip runs, and its own skips are judged against the table by the harness.
"""

import json
import os
from pathlib import Path

import pytest


def compat_name(item):
    """``TestClass::test_name[param]`` or ``test_module::test_name[param]``, as in JUnit."""
    owner = item.cls.__name__ if item.cls is not None else item.module.__name__.rsplit(".", 1)[-1]
    return f"{owner}::{item.name}"


def pytest_collection_modifyitems(items):
    tolerated = json.loads(Path(os.environ["SAMSA_COMPAT_SKIPS"]).read_text())
    for item in items:
        reason = tolerated.get(compat_name(item))
        if reason:
            item.add_marker(pytest.mark.skip(reason=f"samsa compat: {reason}"))

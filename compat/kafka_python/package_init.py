"""Stand-in for kafka-python's ``test/__init__.py``, which its sdist leaves out.

``make compat`` copies this file to ``test/__init__.py`` so that ``test`` is
the sdist's package rather than CPython's own ``test`` package, and makes a
raising future callback fail the test, as the upstream test tree does.
"""

import logging

from kafka.future import Future

logging.basicConfig(level=logging.INFO)
Future.error_on_callbacks = True

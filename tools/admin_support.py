"""What the admin commands (``samsa topics|configs|cluster|groups``) share.

- ``open_admin(args)``: an ``AdminClient`` from the client options, with time limits suited
  to a command line (connect 5 s, request 10 s, retries 10 s: an unreachable or stuck broker
  fails the command in about ten seconds, not Kafka's minute), unless ``-X`` or
  ``--command-config`` sets them.
- argparse types that make bad input a usage error (exit 2): ``key_value`` (``k=v``),
  ``topic_partitions`` (``T`` or ``T:0,1,2``), ``timestamp_ms`` (ISO 8601; local time when it
  has no zone, as Kafka's tools read it).
- ``config_changes``: ``--set k=v`` / ``--delete k`` as ``alter_configs`` changes;
  ``usage_error``: argparse's message format and exit code 2 for checks argparse can't make.
- ``working(args, text)``: a spinner on stderr while a long call runs (terminals only, never
  with ``--json``).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tools.client_options import client_config

if TYPE_CHECKING:
    from samsa.admin import AdminClient

__all__ = ["CLI_DEFAULTS", "admin_config", "config_changes", "key_value", "open_admin",
           "timestamp_ms", "topic_partitions", "usage_error", "working"]

CLI_DEFAULTS = {
    "socket.connection.setup.timeout.ms": 5_000,
    "request.timeout.ms": 10_000,
    "default.api.timeout.ms": 10_000,
}


def admin_config(args: argparse.Namespace) -> dict[str, Any]:
    """The client config of ``args`` with ``CLI_DEFAULTS`` where the user set nothing."""
    config = client_config(args)
    given = {key.replace("_", ".") for key in config}
    for key, value in CLI_DEFAULTS.items():
        if key not in given:
            config[key] = value
    return config


def open_admin(args: argparse.Namespace) -> AdminClient:
    from samsa.admin import AdminClient  # here: the other commands need not load the client

    return AdminClient(admin_config(args))


def key_value(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def topic_partitions(text: str) -> tuple[str, list[int] | None]:
    """``"T"`` -> (T, None: every partition); ``"T:0,2"`` -> (T, [0, 2])."""
    topic, separator, listed = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P[,P...], got {text!r}")
    if not separator:
        return topic, None
    try:
        partitions = sorted({int(p) for p in listed.split(",") if p.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"partitions must be numbers, as in {topic}:0,1,2; got {text!r}") from None
    if not partitions or partitions[0] < 0:
        raise argparse.ArgumentTypeError(f"expected partition numbers after ':', got {text!r}")
    return topic, partitions


def timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 date-time (local time without a zone)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an ISO 8601 date-time such as 2024-05-01T12:00:00 or "
            f"2024-05-01T12:00:00+02:00, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # the local zone, as Kafka's --to-datetime
    return int(moment.timestamp() * 1000)


@contextlib.contextmanager
def working(args: argparse.Namespace, text: str) -> Iterator[None]:
    """A spinner with ``text`` on stderr while the block runs (interactive terminals only)."""
    if getattr(args, "json", False) or not sys.stderr.isatty():
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(text):
        yield


def config_changes(sets: list[tuple[str, str]] | None,
                   deletes: list[str] | None) -> dict[str, str | None]:
    """``--set k=v`` and ``--delete k`` options as ``alter_configs`` changes (None: delete)."""
    changes: dict[str, str | None] = dict(sets or [])
    for key in deletes or []:
        if key in changes:
            raise ValueError(f"config {key!r} is both set and deleted")
        changes[key] = None
    return changes


def usage_error(args: argparse.Namespace, message: str) -> int:
    """Print a usage error the way argparse does and return its exit code, 2."""
    command = " ".join(part for part in ("samsa", getattr(args, "group", ""),
                                         getattr(args, "command", "")) if part)
    print(f"{command}: error: {message}", file=sys.stderr)
    return 2

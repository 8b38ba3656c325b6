"""What every client-side ``samsa`` command shares: where the brokers are, and how output looks.

- ``add_client_options(parser)``: ``--bootstrap-server`` (default ``$SAMSA_BOOTSTRAP_SERVER``
  or ``localhost:9092``), ``--command-config FILE`` (a properties file of client configs) and
  ``-X key=value`` (one client config; repeatable), ``--json``.
- ``client_config(args)``: the client configuration dict those options give.
- ``emit(args, rows, columns=..., document=...)``: an aligned table for people, or JSON (the
  ``document`` if given, else the rows) with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["add_client_options", "client_config", "emit", "print_table"]

DEFAULT_BOOTSTRAP = "localhost:9092"


def add_client_options(parser: argparse.ArgumentParser, *, json_output: bool = True) -> None:
    parser.add_argument(
        "--bootstrap-server", metavar="HOST:PORT[,...]",
        default=os.environ.get("SAMSA_BOOTSTRAP_SERVER", DEFAULT_BOOTSTRAP),
        help="brokers to connect to (default: $SAMSA_BOOTSTRAP_SERVER or localhost:9092)")
    parser.add_argument("--command-config", metavar="FILE", type=Path,
                        help="a properties file of client configs (Kafka's names)")
    parser.add_argument("-X", dest="client_settings", metavar="KEY=VALUE", action="append",
                        default=[], help="one client config, e.g. -X request.timeout.ms=5000")
    if json_output:
        parser.add_argument("--json", action="store_true", help="print JSON for programs")


def _read_properties(path: Path) -> dict[str, str]:
    settings: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text.startswith(("#", "!")):
            continue
        key, separator, value = text.partition("=")
        if not separator:
            raise ValueError(f"{path}:{number}: expected key=value, got {text!r}")
        settings[key.strip()] = value.strip()
    return settings


def client_config(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    """Client configs from ``--command-config``, ``-X``, ``--bootstrap-server`` and ``extra``."""
    config: dict[str, Any] = {}
    if args.command_config is not None:
        config.update(_read_properties(args.command_config))
    for setting in args.client_settings:
        key, separator, value = setting.partition("=")
        if not separator:
            raise ValueError(f"-X expects KEY=VALUE, got {setting!r}")
        config[key.strip()] = value.strip()
    config["bootstrap.servers"] = args.bootstrap_server
    config.setdefault("client.id", "samsa-cli")
    config.update(extra)
    return config


def print_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], *,
                file: Any = None) -> None:
    """Rows as an aligned table under upper-case column headings (``-`` for None)."""
    out = file or sys.stdout
    cells = [[("-" if row.get(c) is None else str(row.get(c))) for c in columns] for row in rows]
    headings = [c.upper().replace("_", "-") for c in columns]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headings)]
    for line in [headings, *cells]:
        print("  ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)).rstrip(), file=out)


def emit(args: argparse.Namespace, rows: Sequence[Mapping[str, Any]], columns: Sequence[str],
         *, document: Any = None) -> None:
    """Print ``rows`` as a table, or as JSON (``document`` if given) with ``--json``."""
    if getattr(args, "json", False):
        json.dump(rows if document is None else document, sys.stdout, indent=2, default=str)
        print()
    else:
        print_table(rows, columns)

"""How the wheel lays out the repository's packages: only Samsa-named top-level packages.

The repository keeps Kafka-like top-level folders (``protocol``, ``storage``, ``broker``,
``replication``, ``tools``), and the code imports them by those names. Installed as top-level
modules they would clash with an application's own ``protocol`` or ``tools``, so the wheel puts
them under one package, ``samsa_server`` (``samsa_server.protocol``, ``samsa_server.broker``, …),
beside ``samsa`` (the client) and ``pyspark_samsa`` (the Spark source). ``bench``, ``tests`` and
``compat`` stay out of the wheel.

``setup.py`` applies this layout to every build except an editable one (``make install`` is an
editable install of the repository as it is): its ``build_py`` copies each module and then
``rewrite_imports`` prefixes the absolute imports of those five packages with ``samsa_server.``.

Invariants of ``rewrite_imports``:
- only import statements change: ``from broker.x import y`` → ``from samsa_server.broker.x
  import y``, ``import protocol.errors as e`` → ``import samsa_server.protocol.errors as e``;
  relative imports, strings and comments are left as they are, every other byte is kept;
- a statement it cannot rewrite faithfully is refused with the file and line
  (``WheelLayoutError``): ``import broker`` / ``import broker.x`` without ``as`` (the name bound
  would change), a ``from`` whose module is not on the ``from`` keyword's line.

Code that names a module in a string (``python -m``, ``importlib``) derives it from
``__package__``/``__name__`` so that it holds in both layouts (``samsa._cli``,
``tools.cluster_launcher``).
"""

from __future__ import annotations

import ast
import re

SERVER_PACKAGE = "samsa_server"
SERVER_PACKAGES = ("protocol", "storage", "broker", "replication", "tools")
WHEEL_TOP_LEVEL = ("samsa", SERVER_PACKAGE, "pyspark_samsa")
_FROM = re.compile(rb"from[ \t]+")


class WheelLayoutError(ValueError):
    """An import the wheel layout cannot rewrite; the message names the file and line."""


def rewrite_imports(source: str, path: str = "<source>") -> str:
    """``source`` with its absolute imports of ``SERVER_PACKAGES`` moved under
    ``SERVER_PACKAGE`` (see the module docstring)."""
    lines = source.encode().splitlines(keepends=True)
    insertions: list[tuple[int, int]] = []  # (line index, byte column) to insert the prefix at
    for node in ast.walk(ast.parse(source, path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in SERVER_PACKAGES:
                    continue
                if alias.asname is None:
                    raise WheelLayoutError(
                        f"{path}:{alias.lineno}: 'import {alias.name}' binds the name "
                        f"{alias.name.split('.')[0]!r}, which the wheel renames: write "
                        f"'import {alias.name} as ...' or 'from ... import ...'")
                insertions.append((alias.lineno - 1, alias.col_offset))
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and node.module.split(".")[0] in SERVER_PACKAGES):
            line = lines[node.lineno - 1]
            keyword = _FROM.match(line, node.col_offset)
            name = node.module.encode()
            if keyword is None or not line.startswith(name, keyword.end()):
                raise WheelLayoutError(f"{path}:{node.lineno}: the module of 'from "
                                       f"{node.module} import' is not on the 'from' line")
            insertions.append((node.lineno - 1, keyword.end()))
    prefix = f"{SERVER_PACKAGE}.".encode()
    for line_index, column in sorted(insertions, reverse=True):
        line = lines[line_index]
        lines[line_index] = line[:column] + prefix + line[column:]
    return b"".join(lines).decode()


def server_init_source() -> str:
    """The ``samsa_server/__init__.py`` the wheel gets (the repository has no such folder)."""
    return ('"""Samsa\'s broker side, as installed: the repository\'s '
            + ", ".join(f"``{name}``" for name in SERVER_PACKAGES)
            + ' packages (see the repository\'s tools/wheel_layout.py)."""\n')

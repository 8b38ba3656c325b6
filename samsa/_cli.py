"""The ``samsa`` console script, and where the broker side's modules are in this installation.

A wheel puts the repository's ``tools``, ``broker``, … under ``samsa_server`` (see the
repository's ``tools/wheel_layout.py``); an editable install of the repository serves them as
top-level packages. ``server_module("tools.cli")`` names the module as this installation has it,
for ``python -m`` and for the console script. The client never imports the broker side: this
module only names it, and imports the CLI when run as the ``samsa`` command.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

SERVER_PACKAGE = "samsa_server"


def server_module(name: str) -> str:
    """``name`` (a module of the repository's broker side, e.g. ``tools.cli``) as installed."""
    if importlib.util.find_spec(SERVER_PACKAGE) is not None:
        return f"{SERVER_PACKAGE}.{name}"
    return name


def main() -> int:
    """``samsa …``: the CLI of ``tools.cli``."""
    cli = importlib.import_module(server_module("tools.cli"))
    code: int = cli.main()
    return code


if __name__ == "__main__":
    sys.exit(main())

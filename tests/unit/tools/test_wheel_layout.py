"""tools.wheel_layout: the wheel's imports under samsa_server, every other byte kept."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tools.wheel_layout import SERVER_PACKAGES, WheelLayoutError, rewrite_imports

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("source", "expected"), [
    ("from broker.config import X\n", "from samsa_server.broker.config import X\n"),
    ("from protocol import errors\n", "from samsa_server.protocol import errors\n"),
    ("import protocol.errors as e\n", "import samsa_server.protocol.errors as e\n"),
    ("import os, storage.log as log\n", "import os, samsa_server.storage.log as log\n"),
    ("def f():\n    from tools import cli\n", "def f():\n    from samsa_server.tools import cli\n"),
    ("if x:\n    from replication.raft import (\n        A,\n    )\n",
     "if x:\n    from samsa_server.replication.raft import (\n        A,\n    )\n"),
    ("from . import sibling\nfrom .broker import y\n", "from . import sibling\nfrom .broker import y\n"),
    ("from brokerage import x\nimport toolsy as t\n", "from brokerage import x\nimport toolsy as t\n"),
    ("s = 'from broker import x'  # from broker import y\n",
     "s = 'from broker import x'  # from broker import y\n"),
    ("x = 'é'; from storage.log import Log\n", "x = 'é'; from samsa_server.storage.log import Log\n"),
    ("from  samsa.types import T\n", "from  samsa.types import T\n"),
])
def test_rewrites_only_the_server_packages_imports(source: str, expected: str) -> None:
    assert rewrite_imports(source) == expected


@pytest.mark.parametrize("source", ["import broker\n", "import protocol.errors\n",
                                    "from \\\n  broker import x\n"])
def test_refuses_what_it_cannot_rewrite_faithfully_naming_the_line(source: str) -> None:
    with pytest.raises(WheelLayoutError, match=r"m\.py:[12]: "):
        rewrite_imports(source, "m.py")


_names = st.sampled_from([*SERVER_PACKAGES, "os", "samsa", "json", "brokers"])
_dotted = st.lists(st.sampled_from(["a", "log", "x_y"]), max_size=2).map(".".join)


@st.composite
def _statements(draw: st.DrawFn) -> str:
    top, rest = draw(_names), draw(_dotted)
    module = f"{top}.{rest}" if rest else top
    indent = "    " * draw(st.integers(0, 2))
    if draw(st.booleans()):
        return f"{indent}from {module} import name as alias"
    return f"{indent}import {module} as alias"


@given(st.lists(_statements(), min_size=1, max_size=6))
def test_each_import_of_a_server_package_gains_the_prefix_and_nothing_else_changes(
        statements: list[str]) -> None:
    body = "".join(f"if True:\n{line if line.startswith(' ') else '    ' + line}\n"
                   for line in statements)
    rewritten = rewrite_imports(body)
    assert rewritten.replace("samsa_server.", "") == body
    modules = [node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
               for node in ast.walk(ast.parse(rewritten))
               if isinstance(node, ast.Import | ast.ImportFrom)]
    for module in modules:
        assert module is not None
        assert module.split(".")[0] not in SERVER_PACKAGES


@pytest.mark.parametrize("package", [*SERVER_PACKAGES, "samsa", "pyspark_samsa"])
def test_every_module_the_wheel_carries_rewrites(package: str) -> None:
    """The build would stop on a module it cannot rewrite: none in the repository."""
    for path in sorted((ROOT / package).rglob("*.py")):
        rewritten = rewrite_imports(path.read_text(), str(path))
        ast.parse(rewritten)

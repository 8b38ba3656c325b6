"""The package layout of a build (everything else is in pyproject.toml).

An editable install (``make install``, ``make run``) serves the repository as it is: its
top-level packages on ``sys.path``. Every other build — ``python -m build``, ``pip install .`` —
makes the wheel layout of ``tools/wheel_layout.py``: ``samsa``, ``samsa_server`` (the
repository's ``protocol``, ``storage``, ``broker``, ``replication`` and ``tools``, imports
rewritten) and ``pyspark_samsa``; no ``bench``, ``tests`` or ``compat``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tools.wheel_layout import (
    SERVER_PACKAGE,
    SERVER_PACKAGES,
    rewrite_imports,
    server_init_source,
)

# setuptools' build_meta runs this file with the command it builds in sys.argv.
EDITABLE = "editable_wheel" in sys.argv
CLIENT_PACKAGES = ["samsa", "pyspark_samsa"]


class WheelBuildPy(build_py):
    """Copies modules as build_py does, then moves their imports under ``samsa_server``."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode and not EDITABLE:
            init = Path(self.build_lib) / SERVER_PACKAGE / "__init__.py"
            init.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(server_init_source())

    def build_module(self, module, module_file, package):  # type: ignore[no-untyped-def]
        outfile, copied = super().build_module(module, module_file, package)
        if not self.editable_mode and not EDITABLE:
            path = Path(outfile)
            path.write_text(rewrite_imports(path.read_text(), str(module_file)))
        return outfile, copied


def _packages() -> tuple[list[str], dict[str, str]]:
    if EDITABLE:
        return find_packages(include=[*SERVER_PACKAGES, *CLIENT_PACKAGES, "bench"]
                             + [f"{name}.*" for name in (*SERVER_PACKAGES, *CLIENT_PACKAGES,
                                                         "bench")]), {}
    packages = find_packages(include=[*CLIENT_PACKAGES, *(f"{name}.*" for name in CLIENT_PACKAGES)])
    directories = {}
    for name in SERVER_PACKAGES:
        for found in find_packages(include=[name, f"{name}.*"]):
            packages.append(f"{SERVER_PACKAGE}.{found}")
        directories[f"{SERVER_PACKAGE}.{name}"] = name
    return packages, directories


PACKAGES, PACKAGE_DIR = _packages()
setup(packages=PACKAGES, package_dir=PACKAGE_DIR, cmdclass={"build_py": WheelBuildPy})

"""The wheel, as someone else's venv gets it: ``python -m build``, a fresh venv, ``pip install``.

Proves the installed distribution exposes only Samsa-named top-level packages (no ``protocol``,
``broker``, ``tools``… to clash with an application's own), leaves ``bench``, ``tests`` and
``compat`` out, imports every module it carries, runs ``samsa broker start``, and that the
example project under ``examples/pytest-project`` passes its tests with the fixtures from that
install (its venv never sees the repository: a fresh directory, no PYTHONPATH).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
STARTED = "Samsa broker started on "
IMPORT_EVERY_MODULE = """
import importlib, pkgutil, sys
failed = []
for top in ("samsa", "samsa_server"):
    package = importlib.import_module(top)
    for module in pkgutil.walk_packages(package.__path__, top + "."):
        try:
            importlib.import_module(module.name)
        except Exception as error:
            failed.append(f"{module.name}: {error!r}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


def _run(arguments: list[str], cwd: Path, timeout: float = 600) -> str:
    done = subprocess.run(arguments, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env=_clean_environment())
    assert done.returncode == 0, f"{arguments} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def _clean_environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items()
            if key not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel ``python -m build`` made (sdist, then the wheel from it)."""
    work = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(ROOT)], cwd=work)
    [wheel] = (work / "dist").glob("samsa-*.whl")
    _run([sys.executable, "-m", "venv", str(work / "venv")], cwd=work)
    _run([str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
         cwd=work)
    return work


def _site_packages(work: Path) -> Path:
    [site] = (work / "venv" / "lib").glob("python3*/site-packages")
    return site


def test_the_wheel_installs_only_samsa_named_top_level_packages(installed: Path) -> None:
    site = _site_packages(installed)
    [dist_info] = site.glob("samsa-*.dist-info")
    records = (dist_info / "RECORD").read_text().splitlines()
    top_level = {line.split(",")[0].split("/")[0] for line in records}
    top_level -= {dist_info.name, "..", "__pycache__"}
    assert top_level == {"samsa", "samsa_server", "pyspark_samsa"}
    for absent in ("protocol", "storage", "broker", "replication", "tools", "bench", "tests",
                   "compat"):
        assert not (site / absent).exists()
    server = {path.name for path in (site / "samsa_server").iterdir() if path.is_dir()}
    assert server - {"__pycache__"} == {"protocol", "storage", "broker", "replication", "tools"}


def test_every_module_the_wheel_carries_imports(installed: Path) -> None:
    python = installed / "venv" / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--quiet", "pytest"], cwd=installed)
    _run([str(python), "-c", IMPORT_EVERY_MODULE], cwd=installed)


def test_samsa_broker_start_runs_from_the_wheel(installed: Path) -> None:
    samsa = installed / "venv" / "bin" / "samsa"
    process = subprocess.Popen(
        [str(samsa), "broker", "start", "--override", "listeners=PLAINTEXT://127.0.0.1:0",
         "--override", f"log.dirs={installed / 'data'}"],
        cwd=installed, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**_clean_environment(), "PYTHONUNBUFFERED": "1"})
    assert process.stdout is not None
    line = process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    _, log = process.communicate(timeout=60)
    assert line.startswith(STARTED), log
    assert process.returncode == 0, log


@pytest.mark.slow  # ~30 s (pip install, a three-node cluster): `make slow`; the fixtures
# themselves run in make test through tests/integration/test_testing_plugin.py
def test_the_example_project_passes_with_the_installed_fixtures(installed: Path) -> None:
    project = installed / "pytest-project"
    shutil.copytree(ROOT / "examples" / "pytest-project", project)
    python = installed / "venv" / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "--quiet", "--find-links",
          str(installed / "dist"), "-e", f"{project}[test]"], cwd=installed)
    output = _run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=project)
    assert "3 passed" in output, output

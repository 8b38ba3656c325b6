from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.integration.tls_certs import Pki, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl CLI makes the test certificates")
    return make_pki(Path(tmp_path_factory.mktemp("pki")))

"""The install tier: the wheels CI builds, installed from a package index as a user would.

``uv build --all-packages --no-sources`` builds every package once per session;
:mod:`comfy_llm_testworld.wheel_index` serves them on loopback as a PEP 503
index that answers for every ``comfy-llm*`` name, placed before uv's default
index (PyPI, the usual registry, for everything else). Third-party versions are
held to ``uv.lock``'s (a constraints file, ``UV_CONSTRAINT``) so uv's cache
serves them and a run costs links, not downloads; the README's commands run
unchanged, with only the environment pointing uv at the index.

Run it with ``uv run --frozen pytest -p no:cacheprovider testing/install_tier``
(``.ci/run`` does); it needs PyPI (pypi.org and files.pythonhosted.org).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from comfy_llm_testworld.wheel_index import index_environment, serve_wheels

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def uv() -> str:
    found = shutil.which(
        "uv", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    )
    assert found, "uv is in the dev group: run this tier with `uv run`"
    return found


BUILD = ["build", "--all-packages", "--no-sources", "--quiet", "--out-dir"]
"""The release workflow's build (sdists and wheels), as ``uv`` arguments."""


@pytest.fixture(scope="session")
def dist(uv: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every package built the release workflow's way.

    ``COMFY_LLM_DIST`` names a folder already built by ``uv build --all-packages
    --no-sources`` from this tree (``.ci/run`` builds it while other tiers run).
    """
    given = os.environ.get("COMFY_LLM_DIST", "").strip()
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([uv, *BUILD, str(out)], cwd=REPO_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="session")
def index_url(dist: Path) -> Iterator[str]:
    with serve_wheels(dist) as url:
        yield url


@pytest.fixture(scope="session")
def lock_constraints(uv: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv.lock's third-party versions, as a constraints file."""
    done = subprocess.run(
        [
            uv,
            "export",
            "--frozen",
            "--all-packages",
            "--no-dev",
            "--no-hashes",
            "--no-header",
            "--no-annotate",
            "--no-emit-workspace",
            "--extra",
            "cuda",
            "--extra",
            "modal",
            "--extra",
            "apple",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    path = tmp_path_factory.mktemp("constraints") / "constraints.txt"
    path.write_text(done.stdout, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def uv_env(uv: str, index_url: str, lock_constraints: Path) -> dict[str, str]:
    """uv with our index first, the lock's versions, and its cache where it always is."""
    cache = subprocess.run([uv, "cache", "dir"], capture_output=True, text=True, check=True)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("UV_", "PIP_", "VIRTUAL_ENV", "PYTHONPATH"))
    }
    env.update(index_environment(index_url))
    env.update(
        UV_CACHE_DIR=cache.stdout.strip(),
        UV_CONSTRAINT=str(lock_constraints),
        UV_PYTHON_DOWNLOADS="never",
        PATH=os.pathsep.join([str(Path(uv).parent), env["PATH"]]),
        HF_HUB_OFFLINE="1",
        HF_HUB_DISABLE_TELEMETRY="1",
    )
    return env

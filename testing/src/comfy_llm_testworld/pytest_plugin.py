"""Pytest fixtures for the offline test world, loaded by the workspace's root conftest.

Importing this module sets HF_HUB_DISABLE_TELEMETRY=1 for the whole process,
before any test imports huggingface_hub, so no test ever phones home. It also
hides Modal credentials before any test imports ``modal`` (which reads its
config file once, at import): no token variables, and a config path that can
never exist, so a developer's own ``~/.modal.toml`` never lets a test reach
Modal (calls with credentials would leave loopback; see FACTS.md). And it
runs Hypothesis without its wall-clock deadline (see ``_no_hypothesis_deadline``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from ._fake_hub import FakeHub

__all__ = ["fake_hub", "hf_env"]

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
NO_MODAL_CONFIG = os.path.join(os.devnull, "modal.toml")
"""Under the null device, so it can never exist."""
os.environ["MODAL_CONFIG_PATH"] = NO_MODAL_CONFIG
for _name in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "MODAL_PROFILE"):
    os.environ.pop(_name, None)


def _no_hypothesis_deadline() -> None:
    """Hypothesis's 200 ms default deadline is a wall-clock assertion.

    On a loaded machine a first example can take 400 ms and the test fails as
    "flaky" (seen under CI load, issue 32): green must not depend on an idle
    box, so the workspace runs every property test without a deadline.
    """
    try:
        from hypothesis import settings
    except ImportError:  # the vLLM venv may lack it
        return
    settings.register_profile("comfy-llm", deadline=None)
    settings.load_profile("comfy-llm")


_no_hypothesis_deadline()


@pytest.fixture
def fake_hub() -> Iterator[FakeHub]:
    """A started, empty FakeHub; stopped (all threads joined) after the test.

    The test also fails if the fake Hub itself hit a bug while serving it, so a
    broken fixture never masquerades as a product failure.
    """
    hub = FakeHub()
    with hub:
        yield hub
    if hub.internal_errors:
        pytest.fail("FakeHub internal error(s):\n" + "\n".join(hub.internal_errors))


@pytest.fixture
def hf_env(
    fake_hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> FakeHub:
    """Point the environment at ``fake_hub`` with a private HF_HOME and no token.

    huggingface_hub reads HF_ENDPOINT only when its constants module first
    loads, so code under test must still pass ``endpoint=hub.endpoint``; the
    variables here serve subprocesses and code that reads them at call time.
    """
    monkeypatch.setenv("HF_ENDPOINT", fake_hub.endpoint)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf_home")))
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "5")
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "5")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    return fake_hub

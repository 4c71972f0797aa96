"""``comfy-llm modal status`` and ``modal stop`` on the strict stand-in (review r2 finding 16)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from comfy_llm._cli import main
from comfy_llm_testworld.modal_strict import StrictTransport

pytestmark = pytest.mark.slow


@pytest.fixture
def standin(tmp_path: Path) -> Iterator[list[StrictTransport]]:
    from comfy_llm_modal_remote import use_transport

    made: list[StrictTransport] = []

    def factory(name: str, directory: Path) -> StrictTransport:
        made.append(StrictTransport(name, directory, root=tmp_path / "modal"))
        return made[-1]

    use_transport(factory)
    yield made
    use_transport(None)
    for transport in made:
        transport.close()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_status_shows_the_installations_app_and_stop_ends_its_warm_containers(
    standin: list[StrictTransport], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from comfy_llm_modal_remote import connect

    root = str(tmp_path / "storage")
    code, out = _cli(capsys, "modal", "status", "--storage-root", root)
    assert code == 0 and out.startswith("comfy-llm-") and "not deployed" in out
    transport = connect(Path(root)).transport
    assert isinstance(transport, StrictTransport)
    transport.ensure_ready(lambda event: None)
    transport.container("default")  # a warm GPU container, billing its idle window
    code, out = _cli(capsys, "modal", "status", "--json", "--storage-root", root)
    status = json.loads(out)
    assert code == 0 and status["deployed"] is True and status["containers"] == 1
    assert status["app"] == transport.app_name
    code, out = _cli(capsys, "modal", "stop", "--storage-root", root)
    assert code == 0 and "stopped (1 containers ended)" in out
    assert transport.status()["containers"] == 0 and not transport.status()["deployed"]
    code, out = _cli(capsys, "modal", "stop", "--storage-root", root)
    assert "not deployed (nothing to stop)" in out

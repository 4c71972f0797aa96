"""The test world reads modal-remote only through public modules (issue 28, step 4).

The strict Modal stand-in models the platform with the product's own values
(deploy strategy, ``with_options``, the worker's Queue writer, the time
windows); it takes them from :mod:`comfy_llm_modal_remote.deployment`, so
modal-remote's private layout can move without breaking the stand-in.
"""

from __future__ import annotations

import ast
from pathlib import Path

import comfy_llm_modal_remote.deployment as deployment

_TESTWORLD = Path(__file__).resolve().parents[3] / "testing" / "src"


def _private_imports(source: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "comfy_llm_modal_remote" and any(p.startswith("_") for p in parts):
                found.append(f"{source.name}:{node.lineno} {name}")
    return found


def test_the_test_world_imports_no_private_modal_remote_module() -> None:
    sources = sorted(_TESTWORLD.rglob("*.py"))
    assert sources, f"no test world under {_TESTWORLD}"
    private = [hit for source in sources for hit in _private_imports(source)]
    assert private == [], "use comfy_llm_modal_remote.deployment: " + ", ".join(private)


def test_the_seam_gives_the_stand_in_the_products_own_values() -> None:
    options = deployment.engine_options("L40S", caption=True)
    assert options["gpu"] == "L40S" and options["max_containers"] == 1
    assert deployment.DEPLOY_STRATEGY == "recreate"
    assert deployment.ENGINE_SCALEDOWN_SECONDS > 0
    assert set(deployment.__all__) <= set(dir(deployment))

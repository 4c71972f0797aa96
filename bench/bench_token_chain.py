"""Benchmark: the node's per-token callback chain alone, in CPU time.

    uv run --frozen python bench/bench_token_chain.py [--reference FILE]

The resident manager's ``TokenRelay`` feeding the node's ``ComfyGlue`` (the
ComfyUI stand-in's bar and interrupt check), driven by a loop of 128 tokens
of growing text, no engine: the calling thread's CPU time per token
(``time.thread_time``), so other jobs on a shared CPU barely move it.
``--reference`` loads another version of ``comfy_llm_residency/_generation.py``
(e.g. ``git show main:packages/residency/src/comfy_llm_residency/_generation.py``)
and interleaves the two, for a before/after figure.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOKENS = 128


def _load(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("reference_generation", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.TokenRelay


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", type=Path)
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    os.environ["COMFYUI_STANDIN_BASE"] = tempfile.mkdtemp(prefix="comfy-llm-bench-")
    from comfy_llm_residency import TokenRelay
    from comfy_llm_testworld.comfyui_standin import installed_standin

    relays = {"current": TokenRelay}
    if args.reference:
        relays["reference"] = _load(args.reference)
    texts = ["".join(f"word{i} " for i in range(n + 1)) for n in range(TOKENS)]
    with installed_standin():
        import comfy.utils
        from comfy_llm import ComfyGlue

        def per_token_us(relay_class: Any) -> float:
            glue = ComfyGlue("bench-1", reasoning_enabled=True)
            relay = relay_class(TOKENS, glue.progress, glue.on_token, time.monotonic)
            relay.start()
            began = time.thread_time()
            for index, text in enumerate(texts):
                relay.token(index, text)
            return 1e6 * (time.thread_time() - began) / TOKENS

        results: dict[str, list[float]] = {name: [] for name in relays}
        order = list(relays.items())
        for round_index in range(args.rounds):
            for name, relay_class in order[round_index % 2 :] + order[: round_index % 2]:
                comfy.utils.calls.clear()
                comfy.utils.updates.clear()
                results[name].append(per_token_us(relay_class))
    for name, values in results.items():
        low, _, high = statistics.quantiles(values, n=4)
        print(
            f"{name}: {statistics.median(values):.2f} us CPU per token "
            f"(quartiles {low:.2f}-{high:.2f}, {len(values)} rounds of {TOKENS} tokens)"
        )


if __name__ == "__main__":
    main()

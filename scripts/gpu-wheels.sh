#!/usr/bin/env bash
# Wheels of the project's own dependencies for scripts/gpu-check.sh on a bare GPU
# machine (no network there): everything uv.lock pins for the workspace packages the
# check installs, except what that machine brings (torch, transformers and their
# CUDA/NVIDIA stack) and the engines it does not need (vLLM, MLX, Modal).
#
#   scripts/gpu-wheels.sh [DIR]     (default: gpu-wheels/; needs PyPI)
#
# Prints the folder's size with the tracked working tree's: together they must
# stay under the device machine's 64 MiB carry limit.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-gpu-wheels}"
mkdir -p "$DIR"
requirements="$(mktemp)"
trap 'rm -f "$requirements"' EXIT
uv export --frozen --no-hashes --no-emit-workspace --no-dev \
  --package comfy-llm-backend-cuda --package comfy-llm --package comfy-llm-testworld \
  | grep -Ev '^(#|-e |\s)|^(nvidia-|cuda-)|^(torch|torchvision|transformers|triton|vllm|mlx|mlx-vlm|mlx-metal|modal|tokenizers|safetensors|huggingface-hub|numpy|sympy|networkx|jinja2|markupsafe|filelock|fsspec|regex|pyyaml|packaging|tqdm|requests|urllib3|idna|certifi|charset-normalizer|typing-extensions|setuptools|mpmath|hf-xet)==' \
  | grep -v "python_full_version >= '3.12'" | sed 's/ *;.*$//' >"$requirements"
# the GPU machine is Linux x86_64 with Python 3.11, as this one (sdists only where
# PyPI has no wheel, e.g. docopt)
uvx --python 3.11 pip download --quiet --no-deps -r "$requirements" -d "$DIR" \
  pytest pytest-timeout iniconfig pluggy
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
wheels=$(du -sb "$DIR" | cut -f1)
echo "gpu-wheels: $DIR $((wheels / 1024)) KiB + tracked tree $((tree / 1024)) KiB = $(((wheels + tree) / 1048576)) MiB (limit 64 MiB)"

#!/usr/bin/env bash
# The cp312 wheels scripts/gpu-check.sh unpacks on the lent GPU machine (no network
# there): only the third-party packages the workspace imports that its image lacks
# (its python3 is Python 3.12 with torch, Transformers, NumPy, Pillow, psutil,
# pytest and nvidia-ml-py; device KINDS.md). Versions are uv.lock's; PyAV is left out
# (35.8 MiB; gpu-check.sh stubs it: no video is checked). num2words (SmolVLM's processor
# imports it) comes without docopt, which only its command line uses and which PyPI has
# as an sdist alone. The bitsandbytes extra
# (bitsandbytes 41 MiB, accelerate) comes along for tests/gpu/test_gpu_bitsandbytes.py:
# 51 MiB with the tree in December 2026.
#
#   scripts/gpu-wheels.sh [DIR]     (default: gpu-wheels/; needs PyPI)
#
# Prints the folder's size with the tracked working tree's: together they must
# stay under the device machine's 64 MiB carry limit.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-gpu-wheels}"
mkdir -p "$DIR"
NEEDED='^(llguidance|jsonschema|jsonschema-specifications|referencing|rpds-py|pypdf|num2words|bitsandbytes|accelerate)=='
requirements="$(mktemp)"
trap 'rm -f "$requirements"' EXIT
uv export --frozen --no-hashes --no-emit-workspace --no-dev --extra bitsandbytes \
  --package comfy-llm-backend-cuda --package comfy-llm --package comfy-llm-testworld \
  | sed 's/ *;.*$//' | grep -E "$NEEDED" | sort -u >"$requirements"
# the image is Ubuntu 24.04 (glibc 2.39): pip matches each manylinux_2_N tag exactly
platforms=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
for n in $(seq 17 39); do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
uvx pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" -r "$requirements" -d "$DIR"
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
wheels=$(du -sb "$DIR" | cut -f1)
echo "gpu-wheels: $DIR $((wheels / 1024)) KiB + tracked tree $((tree / 1024)) KiB = $(((wheels + tree) / 1048576)) MiB (limit 64 MiB)"

#!/usr/bin/env bash
# Build the virtual environment the real-ComfyUI test tier runs ComfyUI in.
#
# Usage: scripts/build-comfyui-env.sh [COMFYUI_SOURCE]
#   COMFYUI_SOURCE: a ComfyUI source tree (default: $COMFYUI_DIR, else ../shared/comfyui);
#   it is only read. The venv goes to $COMFYUI_VENV (default .venv-comfyui).
#
# ComfyUI's own requirements.txt, with torch/torchvision pinned to the same
# PyPI builds as the workspace (2.13.0 / 0.28.0, they run on the CPU) so uv's
# cache serves them; the node itself is installed by the tests, the README's
# way 1 (its requirements.txt into this interpreter). llama-cpp-python (the GGUF
# test) is the workspace venv's own build packed as a wheel: its sdist would
# compile llama.cpp again (~7 min on 2 cores); packing and installing take seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
SOURCE="${1:-${COMFYUI_DIR:-../shared/comfyui}}"
VENV="${COMFYUI_VENV:-.venv-comfyui}"
if [ ! -f "$SOURCE/main.py" ] || [ ! -f "$SOURCE/requirements.txt" ]; then
  echo "build-comfyui-env: no ComfyUI source tree at $SOURCE" >&2
  exit 2
fi
overrides="$(mktemp)"
wheels="$(mktemp -d)"
trap 'rm -rf "$overrides" "$wheels"' EXIT
printf 'torch==2.13.0\ntorchvision==0.28.0\n' > "$overrides"

uv venv --quiet --python 3.11 --allow-existing "$VENV"
uv pip install --quiet --python "$VENV/bin/python" --override "$overrides" \
  -r "$SOURCE/requirements.txt"
# (skipped when this venv already holds that build: same version and build flags)
llama_build='import importlib.metadata as m; d = m.distribution("llama-cpp-python")
print(d.version, d.read_text("uv_build.json"))'
if [ "$(.venv/bin/python -c "$llama_build")" != "$("$VENV/bin/python" -c "$llama_build" 2>/dev/null)" ]; then
  llama_wheel="$(.venv/bin/python scripts/wheel-from-venv.py llama-cpp-python "$wheels")"
  uv pip install --quiet --python "$VENV/bin/python" "$llama_wheel"
fi
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md
print("comfyui venv: torch", md.version("torch"), "transformers", md.version("transformers"),
      "llama-cpp-python", md.version("llama-cpp-python"))
PY

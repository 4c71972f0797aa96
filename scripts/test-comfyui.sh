#!/usr/bin/env bash
# The real-ComfyUI test tier: build ComfyUI's venv, then run testing/comfyui_tier.
#
# ComfyUI is found at $COMFYUI_DIR, else ../shared/comfyui (a source tree; only
# read: the tests copy it to a temporary folder). When neither exists this
# tier, and only this tier, is skipped, and the script says so.
set -euo pipefail
cd "$(dirname "$0")/.."
SOURCE=""
for candidate in "${COMFYUI_DIR:-}" ../shared/comfyui; do
  if [ -n "$candidate" ] && [ -f "$candidate/main.py" ]; then
    SOURCE="$(cd "$candidate" && pwd)"
    break
  fi
done
if [ -z "$SOURCE" ]; then
  echo "real-ComfyUI tier SKIPPED: no ComfyUI source tree at \$COMFYUI_DIR (${COMFYUI_DIR:-unset}) or ../shared/comfyui"
  exit 0
fi
scripts/build-comfyui-env.sh "$SOURCE"
COMFYUI_DIR="$SOURCE" uv run --frozen pytest -p no:cacheprovider testing/comfyui_tier "$@"

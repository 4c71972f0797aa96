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
# $COMFY_LLM_COMFYUI_PART: "all" (default) runs the whole tier with the frontend ComfyUI
# pins, then the browser tests on the newest frontend; "pinned" runs only the first
# part, "newest" only the second, in a venv of its own ($COMFYUI_NEWEST_VENV), so
# .ci/run can give the two parts to different lanes.
PART="${COMFY_LLM_COMFYUI_PART:-all}"
NEWEST_FRONTEND="${COMFY_LLM_NEWEST_FRONTEND:-1.58.1}"
case "$PART" in all | pinned | newest) ;; *)
  echo "test-comfyui: COMFY_LLM_COMFYUI_PART is '$PART'; use all, pinned or newest" >&2
  exit 2
  ;;
esac
# $COMFY_LLM_JUNIT_DIR: where each run writes its JUnit report (.ci/run's timing report).
pinned_junit=() newest_junit=()
if [ -n "${COMFY_LLM_JUNIT_DIR:-}" ]; then
  pinned_junit=(--junitxml="$COMFY_LLM_JUNIT_DIR/junit-comfyui.xml")
  newest_junit=(--junitxml="$COMFY_LLM_JUNIT_DIR/junit-comfyui-newest.xml")
fi

if [ "$PART" = newest ]; then
  # Its own venv: ComfyUI's requirements (uv's cache serves them) plus the newest
  # frontend, so the pinned part may run at the same time in .venv-comfyui.
  VENV="${COMFYUI_NEWEST_VENV:-.venv-comfyui-newest}"
  COMFYUI_VENV="$VENV" scripts/build-comfyui-env.sh "$SOURCE"
  uv pip install --quiet --python "$VENV/bin/python" "comfyui-frontend-package==$NEWEST_FRONTEND"
  COMFYUI_DIR="$SOURCE" COMFYUI_PYTHON="$PWD/$VENV/bin/python" COMFY_LLM_FRONTEND="$NEWEST_FRONTEND" \
    uv run --frozen pytest -p no:cacheprovider testing/comfyui_tier/test_browser.py \
    "${newest_junit[@]}" "$@"
  exit 0
fi

# (Quick when .ci/run already built it in the background.)
scripts/build-comfyui-env.sh "$SOURCE"
# The whole tier, the browser tests included, with the frontend ComfyUI pins:
COMFYUI_DIR="$SOURCE" uv run --frozen pytest -p no:cacheprovider testing/comfyui_tier \
  "${pinned_junit[@]}" "$@"
if [ "$PART" = pinned ]; then
  exit 0
fi
# The browser tests again on the newest frontend, installed into the same venv, then
# the pinned one put back (the venv is kept between runs).
VENV="${COMFYUI_VENV:-.venv-comfyui}"
uv pip install --quiet --python "$VENV/bin/python" "comfyui-frontend-package==$NEWEST_FRONTEND"
status=0
COMFYUI_DIR="$SOURCE" COMFY_LLM_FRONTEND="$NEWEST_FRONTEND" uv run --frozen pytest \
  -p no:cacheprovider testing/comfyui_tier/test_browser.py "${newest_junit[@]}" "$@" || status=$?
uv pip install --quiet --python "$VENV/bin/python" \
  "$(grep '^comfyui-frontend-package==' "$SOURCE/requirements.txt")"
exit "$status"

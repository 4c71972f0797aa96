#!/usr/bin/env bash
# The GPU check: what only a real NVIDIA GPU can show, written to one JSON.
#
#   scripts/gpu-check.sh [OUT.json]        (default: $OUT/gpu-check.json, else gpu-check.json)
#
# Made for the lent H200 (vLLM review r2, F1 and "GPU check plan"): its `python3` is
# Python 3.12 and is itself a venv holding torch and Transformers; there is no network
# and no build backend. So nothing is built and no venv is made: the image's own
# interpreter ($PYTHON, default python3) runs the workspace from source
# (packages/*/src and testing/src on PYTHONPATH), and the few third-party wheels the
# image lacks come from $GPU_WHEELS (default gpu-wheels/, cp312, made by
# scripts/gpu-wheels.sh where PyPI is reachable), unpacked with
# `pip install --no-deps --target` into a scratch site folder. PyAV is only imported
# (comfy_llm_inputs' video modules), never used here: without its wheel a one-file stub
# stands in. vLLM cannot run there (its 0.32 wheel needs torch 2.13 and is 311 MiB), so
# no stage asks for it. The stages (scripts/gpu_check.py) each record status, seconds
# and figures; a failed one never stops the next; without CUDA the GPU stages say
# "skipped" and why; $GPU_CHECK_STAGES=a,b runs only those (a rerun). Exit: 0, 1 when a
# stage failed, 2 when the install failed.
set -uo pipefail
cd "$(dirname "$0")/.."
REPORT="${1:-${OUT:+$OUT/gpu-check.json}}"
REPORT="${REPORT:-gpu-check.json}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PY="${PYTHON:-python3}"
WHEELS="${GPU_WHEELS:-gpu-wheels}"
SITE="$WORK/site"
STUBS="$WORK/stubs"
mkdir -p "$SITE" "$STUBS"
began=$(date +%s)
shopt -s nullglob
wheels=("$WHEELS"/*.whl)
if [ "${#wheels[@]}" -gt 0 ]; then
  "$PY" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir \
    --disable-pip-version-check --target "$SITE" "${wheels[@]}" \
    || { echo "gpu-check: unpacking the wheels of $WHEELS failed" >&2; exit 2; }
fi
if ! PYTHONPATH="$SITE" "$PY" -c "import av" 2>/dev/null; then
  mkdir -p "$STUBS/av"
  cat >"$STUBS/av/__init__.py" <<'STUB'
"""Stand-in for PyAV in the GPU check: imported by comfy_llm_inputs, never used there."""


def __getattr__(name):
    raise ImportError(f"PyAV is not installed in the GPU check (av.{name}): no video here")
STUB
fi
src=""
for folder in packages/*/src testing/src; do src="$src:$PWD/$folder"; done
export PYTHONPATH="$SITE$src:$STUBS${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1
"$PY" -c "import comfy_llm, comfy_llm_backend_cuda, comfy_llm_structured, comfy_llm_testworld" \
  || { echo "gpu-check: the workspace does not import with $PY" >&2; exit 2; }
echo "gpu-check: installed in $(( $(date +%s) - began )) s with $PY ($("$PY" -V 2>&1))"
"$PY" scripts/gpu_check.py "$REPORT" "$WORK"

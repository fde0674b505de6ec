#!/usr/bin/env bash
# Creates the separate Python environment for real MiniCPM-o 4.5 / Realtime-Venus checkpoints
# on a GPU machine (never part of ./dev.sh setup): their remote code pins transformers==4.51.0
# and torch<=2.8, which the default environment (torch 2.13 CPU, transformers 5.x) cannot hold.
#
#   scripts/venus_gpu_env.sh                 # -> .venv-venus
#   VENUS_GPU_VENV=/opt/venus scripts/venus_gpu_env.sh
#   TORCH_INDEX=https://download.pytorch.org/whl/cu126 scripts/venus_gpu_env.sh
#
# Then: .venv-venus/bin/venus-ros bench gpu   and   frontend spec venus:/path/to/checkpoint
# Unverified on these development machines (no GPU, no network to PyTorch's index).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENUS_GPU_VENV:-$ROOT/.venv-venus}"
TORCH_INDEX="${TORCH_INDEX:-https://download.pytorch.org/whl/cu128}"
# onnxruntime-gpu built for CUDA 12 (torch<=2.8 wheels are CUDA 12); 1.23+ default to CUDA 13.
ORT_GPU="${ORT_GPU:-onnxruntime-gpu>=1.19,<1.23}"

log() { printf '[venus_gpu_env] %s\n' "$*"; }

command -v nvidia-smi >/dev/null || log "warning: nvidia-smi not found; is this a GPU machine?"
[[ -x "$VENV/bin/python" ]] || { log "creating $VENV"; python3 -m venv "$VENV"; }
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check "$@"; }
pip install -q --upgrade pip
log "torch (CUDA) from $TORCH_INDEX"
pip install -q "torch>=2.3,<=2.8" "torchaudio<=2.8" --index-url "$TORCH_INDEX"
log "venus_ros with the checkpoints' pins (.[venus])"
pip install -q -r "$ROOT/requirements-ros.txt" -e "$ROOT[venus]"
# The CPU and GPU ONNX Runtime packages both provide `onnxruntime`: keep only the GPU one.
log "swapping onnxruntime for $ORT_GPU"
pip uninstall -q -y onnxruntime
pip install -q "$ORT_GPU"
if [[ "${FLASH_ATTN:-0}" == 1 ]]; then
  log "flash-attn (compiles; attn=flash_attention_2)"
  MAX_JOBS="${MAX_JOBS:-8}" pip install -q "flash-attn>=2.7.1,<=2.8.2" --no-build-isolation
fi
"$VENV/bin/python" - <<'PY'
import onnxruntime, torch, transformers
print(f"torch {torch.__version__} (CUDA {torch.version.cuda}, available: {torch.cuda.is_available()})")
print(f"transformers {transformers.__version__}")
print(f"onnxruntime {onnxruntime.__version__}: {onnxruntime.get_available_providers()}")
PY
log "done: $VENV"

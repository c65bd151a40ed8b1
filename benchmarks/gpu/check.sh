#!/usr/bin/env bash
# The one prepared check for the GPU machine (run from the repository root there,
# with the kit of make_kit.sh carried as build/gpu-kit):
#   run(command="bash benchmarks/gpu/check.sh", carry=["build/gpu-kit"], timeout_s=...)
# It installs the kit, then runs the gpu-marked tests, the CUDA provider's
# conformance and benchmarks/cuda.py; everything it prints is also kept in $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
SITE=/tmp/gpu-site
PY=${PYTHON:-python3}
# --no-deps: the kit is complete but for numpy, which the machine has
"$PY" -m pip install -q --no-index --no-deps --target "$SITE" build/gpu-kit/*.whl 2>&1 | tail -3
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$SITE/bin:$PATH"
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
"$PY" -c "import ortcore; print(ortcore.get_available_providers())" | tee "$OUT/providers.txt"
"$PY" -m pytest -q -p no:cacheprovider -m gpu plugins/cuda/tests plugins/tensorrt/tests 2>&1 \
    | tail -15 | tee "$OUT/gpu-tests.txt"
timeout 300 "$PY" -m ortcore conformance --provider cuda --jobs 8 --no-progress \
    --report "$OUT/conformance-cuda" 2>&1 | tail -25 | tee "$OUT/conformance.txt"
timeout 200 "$PY" benchmarks/cuda.py --runs 20 2>&1 | tail -8 | tee "$OUT/bench.txt"

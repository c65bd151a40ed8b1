#!/usr/bin/env bash
# Build the kit the GPU machine needs (it has Python 3.12, numpy and torch, no
# network): wheels of ortcore, its providers and their dependencies for
# CPython 3.12 on x86-64 Linux, and pycuda from shared/gpu/wheels.
# usage: benchmarks/gpu/make_kit.sh [KIT_DIR]     (default build/gpu-kit; must stay < 64 MiB)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
KIT=$(realpath -m "${1:-$ROOT/build/gpu-kit}")
PY=${PYTHON312:-python3.12}
rm -rf "$KIT" && mkdir -p "$KIT"
"$PY" -m pip wheel -q --no-deps -w "$KIT" "$ROOT" "$ROOT/plugins/cpu" "$ROOT/plugins/cuda"
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$KIT" onnx onnx-ir pluggy ml_dtypes protobuf typing_extensions pytest iniconfig packaging \
    markupsafe
rm -f "$KIT"/numpy-*.whl   # the GPU machine has its own numpy
cp "$ROOT"/../shared/gpu/wheels/*.whl "$KIT"/
du -sh "$KIT"
ls "$KIT"

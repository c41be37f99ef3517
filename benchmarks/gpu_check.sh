#!/usr/bin/env bash
# Check tprules' CUDA kernels on a machine with a GPU and time fused against unfused:
#
#     bash benchmarks/gpu_check.sh [OUT_DIR] [gpu_check.py options, e.g. --repeat 20]
#
# Needs python3 with numpy, numba, numba-cuda (`pip install "numba-cuda[cu12]"` on a CUDA 12
# driver, "numba-cuda[cu13]" on CUDA 13), networkx, rich and lark. A package missing there
# can travel as wheels in .whl/ at the repository's root (see docs/runtime.md); they are
# installed into /tmp/tprules-site first. Writes OUT_DIR/gpu_check.json and the log there.
# The library matmul path (cuBLAS) is checked and timed when CuPy or a CUDA build of PyTorch
# imports and sees the GPU (gpu_check.json's environment says which core ran, and why).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT_DIR=${OUT:-/tmp/tprules-gpu-check}
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then OUT_DIR=$1; shift; fi
mkdir -p "$OUT_DIR"
if ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/tprules-site .whl/*.whl \
        && export PYTHONPATH=/tmp/tprules-site${PYTHONPATH:+:$PYTHONPATH}
fi
unset NUMBA_ENABLE_CUDASIM
export PYTHONUNBUFFERED=1
export TPRULES_CACHE_DIR=${TPRULES_CACHE_DIR:-/tmp/tprules-cache}
nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not found"
$PY -c "from tprules.runtime.devices.gemm_providers import PROBES; [print('matmul library', n + ':', p()) for n, p in PROBES]"
$PY -c "import numba, numba_cuda, numpy, networkx, rich, lark" || { echo "missing Python packages (see above)"; exit 2; }
# First build every kernel for this GPU's architecture with `tprules compile` (registers, shared
# memory and spills where ptxas is installed), then the fused groups of every stage kind.
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
ARCH=sm_${CC:-90}
for dir in facts/*/; do
    [ -f "$dir/op.facts" ] || continue
    name=$(basename "$dir")
    $PY -m tprules compile "$dir" --device cuda --arch "$ARCH" > "$OUT_DIR/compile-$name.log" 2>&1
    echo "tprules compile $name --arch $ARCH: exit $? ($(tail -1 "$OUT_DIR/compile-$name.log"))"
done
$PY benchmarks/ptx_check.py --arch "$ARCH" --json "$OUT_DIR/ptx_check.json" > "$OUT_DIR/ptx_check.log" 2>&1
echo "ptx_check: exit $? ($(tail -1 "$OUT_DIR/ptx_check.log"))"
$PY benchmarks/gpu_check.py --json "$OUT_DIR/gpu_check.json" "$@" 2>&1 | tee "$OUT_DIR/gpu_check.log"
exit "${PIPESTATUS[0]}"

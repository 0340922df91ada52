#!/usr/bin/env bash
# Measure this GPU node with `autopar profile`, in at most BUDGET_S seconds (default 300):
#   1. a quick run (about 30 s on one GPU, plus start-up), written to profiles/measured/NAME.yaml;
#   2. a full run, if the time left allows, written over the same file. Writes are atomic,
#      so a full run cut short by the budget leaves the quick profile in place.
# Then it prints the datasheet comparison (GEMM plateau, HBM) from the written profile, and
#   3. `autopar calibrate` on one GPU (the scaled Llama 3.1 8B, dp1, step time predicted from
#      the profile just written; and tp2 when two GPUs are visible), text and JSON kept in the logs.
#
# Needs a CUDA build of torch and autopar importable from the repo root, e.g.
#   pip install torch==2.13.0 && pip install -e '.[profile]'
# Usage: bash benchmarks/gpu_profile.sh            (NAME=h200-1gpu by default)
#        NAME=h100-8gpu BUDGET_S=600 bash benchmarks/gpu_profile.sh
# When $OUT is set (a folder that is copied back), the profiles and logs are copied there too.
set -uo pipefail
cd "$(dirname "$0")/.."

NAME=${NAME:-h200-1gpu}
BUDGET_S=${BUDGET_S:-300}
COMPARE=${COMPARE:-h100-sxm}
PY=${PYTHON:-python3}
DEST="profiles/measured/$NAME.yaml"
LOGS=${OUT:-/tmp}/autopar-gpu-profile
mkdir -p "$LOGS" profiles/measured
start=$(date +%s)
left() { echo $((BUDGET_S - ($(date +%s) - start))); }

export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_profile: no CUDA GPU visible to torch ($("$PY" -c 'import torch; print(torch.__version__)' 2>&1))" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>/dev/null | tee "$LOGS/nvidia-smi.csv"

compare=()
if "$PY" -c "from autopar.io.profiles import load_hardware; load_hardware('$COMPARE')" 2>/dev/null; then
    compare=(--compare "$COMPARE")
fi

echo "== quick run ($(left) s left)"
timeout --kill-after=10 $(( $(left) - 20 )) "$PY" -m autopar profile --device cuda --quick --out "$DEST" "${compare[@]}" \
    > >(tee "$LOGS/quick.out") 2> >(tee "$LOGS/quick.err" >&2)
quick_rc=$?
echo "quick run: exit $quick_rc after $(( $(date +%s) - start )) s"

if [ "$quick_rc" -eq 0 ] && [ "$(left)" -gt 120 ]; then
    echo "== full run ($(left) s left)"
    timeout --kill-after=10 $(( $(left) - 15 )) "$PY" -m autopar profile --device cuda --out "$DEST" "${compare[@]}" \
        > >(tee "$LOGS/full.out") 2> >(tee "$LOGS/full.err" >&2)
    echo "full run: exit $? after $(( $(date +%s) - start )) s (on failure the quick profile stays)"
fi

if [ -f "$DEST" ]; then
    "$PY" - "$DEST" <<'EOF' | tee "$LOGS/datasheet.txt"
import sys
from autopar.io.profiles import load_hardware
from autopar.probe.peaks import lookup

hw = load_hardware(sys.argv[1])
sheet = lookup(hw.gpu_name, hw.memory_bytes / 2**30)
print(f"{hw.gpu_name}: quick={hw.provenance.get('quick')} duration={hw.provenance.get('duration_s')} s")
for dtype, curve in hw.gemm_eff.items():
    rate = hw.peak(dtype) * curve.ys[-1]
    ref = sheet.peaks().get(dtype) if sheet else None
    vs = f" = {rate / 1e12 / ref:.2f} of datasheet {ref:g}" if ref else ""
    print(f"GEMM {dtype} at {curve.xs[-1]:.3g} FLOP: {rate / 1e12:.1f} TFLOP/s{vs}")
hbm = hw.hbm_bytes_per_s * hw.memory_efficiency / 1e9
vs = f" = {hbm / sheet.hbm_bw_gbps:.2f} of datasheet {sheet.hbm_bw_gbps:g}" if sheet else ""
print(f"HBM copy: {hbm:.0f} GB/s{vs}")
EOF
    cp "$DEST" "$LOGS/" 2>/dev/null || true
fi
if [ "$(left)" -gt 60 ]; then
    echo "== calibrate ($(left) s left)"
    hw=()
    [ -f "$DEST" ] && hw=(--hardware "$DEST")
    plans=(--plan dp1,tp1,pp1)
    if "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.device_count() >= 2 else 1)"; then
        plans+=(--plan dp1,tp2,pp1); nproc=2
    else
        nproc=1
    fi
    for fmt in text json; do
        flag=(); [ "$fmt" = json ] && flag=(--json)
        timeout --kill-after=10 $(( $(left) / 2 )) "$PY" -m autopar calibrate llama3.1-8b --scale-to-fit --device cuda \
            --nproc "$nproc" "${plans[@]}" "${hw[@]}" "${flag[@]}" > "$LOGS/calibrate.$fmt" 2> "$LOGS/calibrate.$fmt.err"
        echo "calibrate ($fmt): exit $? after $(( $(date +%s) - start )) s"
    done
    cat "$LOGS/calibrate.text"
fi
echo "done in $(( $(date +%s) - start )) s; profile: $DEST; logs: $LOGS"

#!/usr/bin/env bash
# One lent-GPU call, everything the GPU issue asks for in a single campaign:
#   1. the machine (nvidia-smi, torch, CUDA);
#   2. `pytest -m gpu` (the backend contract suite's GPU variants, the torch CUDA tests);
#   3. `bench/bench_gpu.py` (ResNet-50 fp16: raw loop, ours Offline, Server bisection);
#   4. digits torch-cuda fp32 Server at 10 ms, at 20k QPS and above.
# Every step has its own time limit so one slow step cannot eat the others; what each
# step printed goes to $OUT (or ./gpu_out). Wheels the image lacks travel in .whl/
# (see docs/development.md); run from the repository root:
#     bash bench/gpu_campaign.sh
set -u
OUT=${OUT:-$PWD/gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
PYTEST_S=${PYTEST_S:-200}
BENCH_S=${BENCH_S:-230}
DIGITS_QPS=${DIGITS_QPS:-20000 40000 80000}

{ date -u; nvidia-smi -L; nproc; python3 -c 'import sys, torch; print(sys.version.split()[0],
  "torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))'
} >"$OUT/machine.txt" 2>&1

echo "== pytest -m gpu" >&2
timeout -k 5 "$PYTEST_S" python3 -m pytest -m gpu -q -rsx -n 3 --timeout 120 -p no:cacheprovider \
    --continue-on-collection-errors \
    >"$OUT/pytest_gpu.log" 2>&1
echo "pytest exit $?" >>"$OUT/pytest_gpu.log"
tail -3 "$OUT/pytest_gpu.log" >&2

echo "== digits torch-cuda fp32 Server" >&2
for qps in $DIGITS_QPS; do
    runs=$(mktemp -d)
    timeout -k 5 40 python3 -m suite run --benchmark digits --scenario server --backend torch \
        --set 'backend.torch.device="cuda"' --target-qps "$qps" --quick --runs-dir "$runs" \
        >>"$OUT/digits_server.log" 2>&1
    echo "digits server $qps QPS: exit $?" | tee -a "$OUT/digits_server.log" >&2
    cp "$runs"/*/result.json "$OUT/digits_server_$qps.json" 2>/dev/null
done

echo "== bench_gpu" >&2
timeout -k 5 "$BENCH_S" python3 bench/bench_gpu.py --skip-pytest --seconds 3 --probes ${PROBES:-5} \
    --out "$OUT" >"$OUT/bench_gpu.log" 2>&1
echo "bench_gpu exit $?" >>"$OUT/bench_gpu.log"
tail -12 "$OUT/bench_gpu.log" >&2

#!/usr/bin/env bash
# Builds what the GPU checks need (Release, no GUI, kernels for this machine's GPU only) and runs
# every GPU check of the CUDA backend, CUPTI and kernels in a few minutes:
#   1. the plugins' CPU-side unit tests;
#   2. day0_gpu_checks: every backend operator against the CPU reference (fp32, bf16, fp8, int8),
#      device tap statistics, a CUPTI timeline with the expected kernels/copies/flows, RMSNorm
#      bandwidth >= 0.80 x a device-to-device copy, cuBLAS bf16 GEMM and attention prefill
#      FLOP/s (as a fraction of the GEMM's), all measured in this run;
#   3. day0 opcheck --backend cuda against the fp64 CPU reference on shrunk models of several
#      architectures (errors judged by the bundled tolerance table) and on one full-size config;
#   4. day0 run --backend cuda: whole forward passes on the GPU against the fp64 CPU reference;
#   5. `day0 run --plan … --ranks mpi --comm nccl --backend cuda` on one rank (NCCL allows one
#      rank per GPU): the GPU rank over the host-staged NCCL world must generate the in-process
#      CPU run's tokens (skipped without mpirun).
# Prints a summary; exits 0 when everything passed, 1 when a check failed, 77 without a GPU.
# Usage: tests/gpu/run_all.sh [build-dir]   (default: <repo>/build-gpu; DAY0_JOBS sets -j)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
jobs=${DAY0_JOBS:-$(nproc)}
results=()
failed=0

step() { # name, then the command; records PASS/FAIL
    local name=$1
    shift
    echo
    echo "==== $name"
    if "$@"; then
        results+=("PASS  $name")
    else
        results+=("FAIL  $name (exit $?)")
        failed=1
    fi
}

summary() {
    echo
    echo "==== GPU run summary ($(date -u +%Y-%m-%dT%H:%MZ))"
    for r in "${results[@]}"; do
        echo "  $r"
    done
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP: no CUDA device: nvidia-smi finds no GPU on this machine"
    exit 77
fi
nvidia-smi -L

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
step "configure (Release, CUDA, kernels for the local GPU)" \
    cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DDAY0_BUILD_GUI=OFF \
    -DDAY0_WITH_CUDA=ON -DDAY0_CUDA_ARCHITECTURES=native
step "build" cmake --build "$build" -j "$jobs" --target day0 day0_plugin_cuda day0_plugin_cupti \
    day0_gpu_checks day0_plugins_test
if [ "$failed" -ne 0 ]; then
    summary
    exit 1
fi

step "plugin logic unit tests (CPU)" "$build/tests/plugins/day0_plugins_test" --gtest_brief=1
step "GPU operator, tap, CUPTI and performance checks" "$build/tests/gpu/day0_gpu_checks"

day0="$build/app/cli/day0"
models=$(mktemp -d)
trap 'rm -rf "$models"' EXIT
opcheck() { # model folder or name, precision
    "$day0" opcheck "$1" --backend cuda --precision "$2" --tokens 16
}
for m in llama-3.1-8b qwen3-8b qwen3-30b-a3b mixtral-8x7b deepseek-v3 kimi-k2; do
    if "$day0" shrink "$m" --out "$models/$m" -q >/dev/null; then
        step "opcheck --backend cuda: shrunk $m (bf16)" opcheck "$models/$m" bf16
    else
        results+=("FAIL  shrink $m")
        failed=1
    fi
done
step "opcheck --backend cuda: shrunk deepseek-v3 (fp8)" opcheck "$models/deepseek-v3" fp8
step "opcheck --backend cuda: shrunk qwen3-8b (fp32)" opcheck "$models/qwen3-8b" fp32
step "opcheck --backend cuda: qwen3-8b full-size shapes (bf16)" opcheck qwen3-8b bf16

# Whole runs: the forward pass on the GPU (operators the backend declines fall back to the CPU and
# are listed), teacher-forced on the fp64 CPU reference and judged by the tolerance table; exit 1
# when a capture fails its tolerance.
runcheck() { # model folder, precision
    "$day0" run "$1" --backend cuda --precision "$2" --reference fp64 --ids 1,2,3,4,5,6,7,8 \
        --tokens 4 --dump "$models/run-$(basename "$1")-$2"
}
for m in llama-3.1-8b qwen3-30b-a3b deepseek-v3 kimi-k2; do
    [ -d "$models/$m" ] && step "run --backend cuda: shrunk $m (bf16 vs fp64 CPU)" runcheck "$models/$m" bf16
done
[ -d "$models/qwen3-8b" ] && step "run --backend cuda: shrunk qwen3-8b (fp32 vs fp64 CPU)" runcheck "$models/qwen3-8b" fp32
traced_run() { # the run's trace: engine scopes and the CUPTI kernels they launched, one clock
    local t=$models/run-traced.json
    "$day0" run "$models/llama-3.1-8b" --backend cuda --precision bf16 --ids 1,2,3,4 --tokens 2 \
        --trace "$t" -q --no-record >/dev/null || return 1
    python3 - "$t" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = [e.get("name", "") for e in events]
kernels = [e for e in events if e.get("cat") == "kernel"]
print(f"{len(events)} events, {len(kernels)} kernels")
assert "model.layers.0" in names, "no engine scope"
assert kernels, "no CUPTI kernel in the trace"
PY
}
[ -d "$models/llama-3.1-8b" ] && step "run --backend cuda --trace: engine scopes + CUPTI kernels" traced_run

plan_tokens() { # reads `day0 run --plan --json` on stdin; prints the tokens; $1: communicator,
    # $2: backend
    python3 -c 'import json, sys
j = json.load(sys.stdin)
assert j["communicator"] == sys.argv[1], "communicator " + j["communicator"]
assert j["backend"]["backend"] == sys.argv[2], "backend " + j["backend"]["backend"]
print(j["sequences"][0]["generated"])' "$1" "$2"
}
nccl_plan_run() {
    local ckpt=$models/plan-moe want got
    local args=(--plan tp=1 --ids 3,1,4,1,5 --tokens 4 --json -q --no-record)
    "$day0" shrink qwen3-30b-a3b --out "$ckpt" --force --layers 2 --hidden 64 --heads 4 \
        --experts 8 --vocab 250 -q --no-record >/dev/null || return 1
    want=$("$day0" run "$ckpt" "${args[@]}" | plan_tokens in-process day0-cpu) || return 1
    got=$(OMPI_MCA_btl_vader_single_copy_mechanism=none DAY0_PLUGIN_PATH="$build/plugins" \
        timeout 300 mpirun --allow-run-as-root -np 1 "$day0" run "$ckpt" "${args[@]}" \
        --ranks mpi --comm nccl --backend cuda | plan_tokens nccl cuda) || return 1
    echo "in-process tokens: $want"
    echo "mpi + nccl tokens: $got"
    [ -n "$want" ] && [ "$want" = "$got" ]
}
if command -v mpirun >/dev/null 2>&1; then
    step "build the MPI and NCCL plugins" cmake --build "$build" -j "$jobs" \
        --target day0_plugin_mpi day0_plugin_nccl
    if [[ ${results[-1]} == PASS* ]]; then
        step "run --plan tp=1 --ranks mpi --comm nccl --backend cuda (1 rank) = in-process CPU tokens" nccl_plan_run
    fi
else
    results+=("SKIP  run --plan --ranks mpi --comm nccl (mpirun not found)")
fi

summary
exit "$failed"

#!/bin/sh
# On a GPU machine, from the repository root, with bin/grpo-rollout,
# bin/grpo-update, build/tests/test_cuda_ops, build/tests/test_cuda_moe,
# build/tests/test_cuda_train and build/bench/bench_cuda_model built (and build/gpu from scripts/gpu/bundle.sh
# where the machine lacks the C libraries): the checks of docs/gpu.md in
# order, logs under $OUT (or build/gpu-out), a summary last. STEPS picks some:
# "ops memcheck racecheck bats train fwd bench trainbench step moe frozen"
# (train: tests/bats/update_device.bats, grpo-update --device cuda against
# the CPU; moe: the mixtures of experts and gpt-oss, a short run: the three
# unit tests and the device bats tests named for them; frozen: LoRA over a
# packed frozen base (--base-weights), a short run: test_cuda_train and
# update_device.bats' frozen-base test;
# trainbench: bench/gpu_train.sh, against a PyTorch eager step; step:
# bench/gpu_grpo_step.sh, a whole GRPO step against TRL's, with TRL's wheels in
# .whl from scripts/gpu/wheels.sh).
# STEP_SECONDS bounds each step
# (default 300), so a hung kernel costs one step, not the whole run.
set -u
cd "$(dirname "$0")/../.."
LOG=${OUT:-build/gpu-out}
mkdir -p "$LOG"
export LD_LIBRARY_PATH="$PWD/build/gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PWD/bin:$PWD/build/gpu/bats/bin:$PATH"
# a path: the bats suites test it with -x
export GRPO_ROOT="$PWD" GRPO_PY="${GRPO_PY:-$(command -v python3)}"
# libnccl.so.2 for grpo-update under mpirun (lib/cuda/nccl.c dlopens it): the
# image has it in PyTorch's nvidia-nccl package, off the loader's path
nccl_lib=$("$GRPO_PY" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2> /dev/null || true)
[ -n "$nccl_lib" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_lib"
STEPS=${STEPS:-ops memcheck racecheck bats train fwd bench}
LIMIT=${STEP_SECONDS:-300}
summary=""
note() { summary="$summary
$1"; }

nvidia-smi -L || true
missing=$(for f in bin/grpo-rollout bin/grpo-update bin/grpo-advantage build/tests/test_cuda_ops build/tests/test_cuda_moe \
    build/tests/test_cuda_train \
    build/bench/bench_cuda_model; do [ ! -e "$f" ] || ldd "$f"; done | grep 'not found' || true)
[ -z "$missing" ] || { echo "missing libraries:"; echo "$missing"; exit 1; }

for step in $STEPS; do
    case $step in
    ops)
        for t in test_cuda_ops test_cuda_moe test_cuda_train; do
            timeout "$LIMIT" build/tests/$t > "$LOG/$t.txt" 2>&1
            note "$t: exit $?, $(grep -c '^ok' "$LOG/$t.txt") ok, $(grep -c '^not ok' "$LOG/$t.txt") not ok, $(grep -c '# SKIP' "$LOG/$t.txt") skipped"
            grep -E '^not ok|^#' "$LOG/$t.txt" | head -40
        done ;;
    memcheck | racecheck)
        for t in test_cuda_ops test_cuda_moe test_cuda_train; do
            timeout "$LIMIT" compute-sanitizer --tool "$step" --error-exitcode 9 build/tests/$t > "$LOG/$step-$t.txt" 2>&1
            note "compute-sanitizer $step $t: exit $? ($(tail -n 1 "$LOG/$step-$t.txt"))"
        done ;;
    moe)
        # the unit tests whole (seconds): test_cuda_moe's ops, test_cuda_ops' and
        # test_cuda_train's qwen3_moe and gpt_oss cases among the others
        for t in test_cuda_moe test_cuda_ops test_cuda_train; do
            timeout "$LIMIT" build/tests/$t > "$LOG/moe-$t.txt" 2>&1
            note "$t: exit $?, $(grep -c '^ok' "$LOG/moe-$t.txt") ok, $(grep -c '^not ok' "$LOG/moe-$t.txt") not ok"
            grep -E '^not ok|^#' "$LOG/moe-$t.txt" | head -40
        done
        timeout "$LIMIT" bats --tap -f 'mixture' tests/bats/rollout_device.bats tests/bats/update_device.bats \
            > "$LOG/moe-bats.txt" 2>&1
        note "mixture-of-experts bats: exit $?, $(grep -c '^ok' "$LOG/moe-bats.txt") ok, $(grep -c '^not ok' "$LOG/moe-bats.txt") not ok, $(grep -c '# skip' "$LOG/moe-bats.txt") skipped"
        grep -vE '^ok' "$LOG/moe-bats.txt" | head -40 ;;
    frozen)
        # test_cuda_train whole (seconds): its frozen-base ops and trainer cases among the others
        timeout "$LIMIT" build/tests/test_cuda_train > "$LOG/frozen-test_cuda_train.txt" 2>&1
        note "test_cuda_train: exit $?, $(grep -c '^ok' "$LOG/frozen-test_cuda_train.txt") ok, $(grep -c '^not ok' "$LOG/frozen-test_cuda_train.txt") not ok"
        grep -E '^not ok|^#' "$LOG/frozen-test_cuda_train.txt" | head -40
        timeout "$LIMIT" bats --tap -f 'frozen base' tests/bats/update_device.bats > "$LOG/frozen-bats.txt" 2>&1
        note "frozen-base bats: exit $?, $(grep -c '^ok' "$LOG/frozen-bats.txt") ok, $(grep -c '^not ok' "$LOG/frozen-bats.txt") not ok, $(grep -c '# skip' "$LOG/frozen-bats.txt") skipped"
        grep -vE '^ok' "$LOG/frozen-bats.txt" | head -40 ;;
    bats)
        timeout "$LIMIT" bats --tap tests/bats/rollout_device.bats > "$LOG/bats.txt" 2>&1
        note "rollout_device.bats: exit $?, $(grep -c '^not ok' "$LOG/bats.txt") not ok, $(grep -c '# skip' "$LOG/bats.txt") skipped"
        grep -vE '^ok' "$LOG/bats.txt" | head -40 ;;
    train)
        timeout "$LIMIT" bats --tap tests/bats/update_device.bats > "$LOG/train.txt" 2>&1
        note "update_device.bats: exit $?, $(grep -c '^not ok' "$LOG/train.txt") not ok, $(grep -c '# skip' "$LOG/train.txt") skipped"
        grep -vE '^ok' "$LOG/train.txt" | head -40 ;;
    fwd)
        for m in smollm2-135m qwen2.5-0.5b qwen2.5-1.5b; do timeout "$LIMIT" build/bench/bench_cuda_model $m; done > "$LOG/fwd.txt" 2>&1
        note "bench_cuda_model: exit $?"
        cat "$LOG/fwd.txt" ;;
    bench)
        BENCH_DIR=${BENCH_DIR:-/tmp/grpo-bench-gpu} timeout "$LIMIT" sh bench/gpu.sh ${BENCH_NAMES:-} > "$LOG/bench.txt" 2>&1
        note "bench: exit $?"
        cat "$LOG/bench.txt" ;;
    step)
        if [ -d .whl ]; then # the TRL peer's wheels (scripts/gpu/wheels.sh)
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
                export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
        fi
        BENCH_DIR=${BENCH_DIR:-/tmp/grpo-bench-gpu} timeout "$LIMIT" sh bench/gpu_grpo_step.sh > "$LOG/step.txt" 2>&1
        note "step: exit $?"
        cat "$LOG/step.txt" ;;
    trainbench)
        BENCH_DIR=${BENCH_DIR:-/tmp/grpo-bench-gpu} timeout "$LIMIT" sh bench/gpu_train.sh ${BENCH_NAMES:-} > "$LOG/trainbench.txt" 2>&1
        note "trainbench: exit $?"
        cat "$LOG/trainbench.txt" ;;
    esac
done
echo "---- summary$summary"

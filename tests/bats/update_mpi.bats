#!/usr/bin/env bats
# grpo-update data-parallel under mpirun (lib/dataparallel): 1, 2 and 3 ranks (and 5
# on a 4-group batch) oversubscribed on the tiny random llama against the
# one-process step, every loss kind, full and LoRA, with and without --zero 1;
# same bytes for the same N; resuming with another N; ranks that disagree on
# flags or batch; a rank killed with -9; grpo.mk's UPDATE_LAUNCH; the Slurm
# recipes' syntax.
#
# What is compared, and to what (measured on a 2-core AMD machine in
# brackets): the AdamW moments, i.e. the summed gradient and its square, to
# 1e-5 of each tensor's largest element [2.4e-6]; with SGD the weight update
# itself, lr g, to 1e-5 [2e-6]. The new AdamW weights are held more loosely,
# because at the first step an element moves by lr g / (|g| + eps): where the
# gradient is near eps (1e-8, a sum that cancels) its summation-order error
# reaches the weight at full size (--threads does the same on one process;
# update.bats allows 2e-4 there). Full weights: 1e-4 of the tensor's largest
# [2e-5]; a LoRA B, which starts at 0 and moves by about lr everywhere: 0.1
# of its largest [0.043, one element whose gradient is 2e-9]. A rank's share
# left out of the sum would move thousands of elements by about lr and fail
# both (the moments first).
# needs: venv models
load helpers

setup_file() {
    update_fixture
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # shared memory between the local ranks; no network probing
    export OMPI_MCA_btl=self,vader OMPI_MCA_rmaps_base_oversubscribe=1
}

B() { echo "$BATS_FILE_TMPDIR/batch.jsonl"; }
ref() { "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" "$@"; }
needs_mpi() {
    needs_tiny
    command -v mpirun > /dev/null || skip "no mpirun (make deps installs openmpi-bin)"
}
# mpi N ARGS...: grpo-update on N ranks, one OpenMP thread each (the
# one-process runs below use one too: thread count changes float rounding)
mpi() {
    local n=$1
    shift
    mpirun --bind-to none -np "$n" grpo-update --threads 1 "$@"
}
one() { grpo-update --threads 1 "$@"; }

# same_step A B: checkpoint B is checkpoint A's step up to float summation
same_step() {
    ref close "$1/grpo/optimizer.safetensors" "$2/grpo/optimizer.safetensors" 1e-5
    if [ -e "$1/model.safetensors" ]; then
        ref close "$1/model.safetensors" "$2/model.safetensors" 1e-4
    else
        ref close "$1/adapter_model.safetensors" "$2/adapter_model.safetensors" 0.1
    fi
}

# same_metrics A.jsonl B.jsonl: every field but the timings within 1e-6
# relative (1e-12 absolute), nulls where nulls are
same_metrics() {
    "$GRPO_PY" - "$1" "$2" << 'EOF'
import json, math, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) and a, (len(a), len(b))
for x, y in zip(a, b):
    assert x.keys() == y.keys()
    for k in x:
        if k in ("seconds", "tokens_per_second"):
            continue
        u, v = x[k], y[k]
        if u is None or v is None:
            assert u is None and v is None, (k, u, v)
        else:
            assert abs(u - v) <= 1e-6 * max(abs(u), abs(v)) + 1e-12, (k, u, v)
EOF
}

@test "mpirun -np 1 writes the bytes of a run without a launcher; --zero is in --help" {
    needs_mpi
    one --model "$TINY" --in "$(B)" --out plain --lr 1e-3 2> /dev/null
    mpi 1 --model "$TINY" --in "$(B)" --out under --lr 1e-3 --zero 1 2> /dev/null
    diff -r plain/model.safetensors under/model.safetensors
    diff -r plain/grpo/optimizer.safetensors under/grpo/optimizer.safetensors
    grep -q '"zero":0,"ranks":1' plain/grpo/state.json
    grep -q '"zero":1,"ranks":1' under/grpo/state.json
    run grpo-update --help
    printf '%s\n' "$output" | grep -q -- "  --zero N "
    printf '%s\n' "$output" | grep -q "mpirun -np N grpo-update"
}

@test "2 and 3 ranks: every loss kind, full and LoRA, with and without --zero 1, equal the one-process step" {
    needs_mpi
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch masked.jsonl 24 97 --seed 7 --null-adv 2 --truncated 5
    # each kind once full and once LoRA; ranks and --zero rotate across them;
    # the extras put the global normalisers, the entropy threshold, the
    # reference and pi_old through the split
    local kinds=(grpo bnpo dr_grpo dapo cispo sapo)
    local extras=("--top-entropy-quantile 0.5" "--mask-truncated" "--old-logp recompute --max-grad-norm 0.05"
                  "--is-correction token --beta 0" "--importance-level sequence" "--entropy-coef 0.01")
    for i in 0 1 2 3 4 5; do
        local k=${kinds[$i]} x=${extras[$i]}
        for mode in full lora; do
            local lora="" n=$((2 + (i % 2))) zero=$(((i / 2) % 2))
            if [ "$mode" = lora ]; then lora="--lora-r 4 --lora-dropout 0.1"; n=$((5 - n)); zero=$((1 - zero)); fi
            # shellcheck disable=SC2086
            one --model "$TINY" --in masked.jsonl --out "1-$k-$mode" --lr 1e-3 --loss "$k" $x $lora \
                --metrics "1-$k-$mode.jsonl" 2> /dev/null
            # shellcheck disable=SC2086
            mpi "$n" --model "$TINY" --in masked.jsonl --out "n-$k-$mode" --lr 1e-3 --loss "$k" $x $lora \
                --zero "$zero" --metrics "n-$k-$mode.jsonl" 2> /dev/null
            echo "# $k $mode $x: $n ranks, --zero $zero"
            same_step "1-$k-$mode" "n-$k-$mode"
            same_metrics "1-$k-$mode.jsonl" "n-$k-$mode.jsonl"
            grep -q "\"zero\":$zero,\"ranks\":$n" "n-$k-$mode/grpo/state.json"
        done
    done
}

@test "--group-sums: 1, 2 and 3 ranks, every loss kind, full and LoRA, with and without --zero 1: the one-process step to 1e-6 relative, element by element" {
    needs_mpi
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch masked.jsonl 24 97 --seed 7 --null-adv 2 --truncated 5
    local kinds=(grpo bnpo dr_grpo dapo cispo sapo)
    local extras=("--top-entropy-quantile 0.5" "--mask-truncated" "--old-logp recompute --max-grad-norm 0.05"
                  "--is-correction token --beta 0" "--importance-level sequence --beta 0.04" "--entropy-coef 0.01")
    for i in 0 1 2 3 4 5; do
        local k=${kinds[$i]} x=${extras[$i]}
        for mode in full lora; do
            local lora="" file=model.safetensors
            if [ "$mode" = lora ]; then lora="--lora-r 4 --lora-dropout 0.1"; file=adapter_model.safetensors; fi
            # shellcheck disable=SC2086
            one --model "$TINY" --in masked.jsonl --out "1-$k-$mode" --lr 1e-3 --loss "$k" $x $lora --group-sums \
                --metrics "1-$k-$mode.jsonl" 2> /dev/null
            for n in 2 3; do
                local zero=$(((n + i) % 2))
                # shellcheck disable=SC2086
                mpi "$n" --model "$TINY" --in masked.jsonl --out "$n-$k-$mode" --lr 1e-3 --loss "$k" $x $lora \
                    --group-sums --zero "$zero" --metrics "$n-$k-$mode.jsonl" 2> /dev/null
                echo "# $k $mode $x: $n ranks, --zero $zero"
                ref close-each "1-$k-$mode/$file" "$n-$k-$mode/$file" 1e-6
                ref close-each "1-$k-$mode/grpo/optimizer.safetensors" "$n-$k-$mode/grpo/optimizer.safetensors" 1e-6
                same_metrics "1-$k-$mode.jsonl" "$n-$k-$mode.jsonl"
            done
        done
    done
    # without it, the first AdamW step moves some element by more (the test can fail)
    one --model "$TINY" --in masked.jsonl --out plain1 --lr 1e-3 2> /dev/null
    mpi 2 --model "$TINY" --in masked.jsonl --out plain2 --lr 1e-3 2> /dev/null
    ! ref close-each plain1/model.safetensors plain2/model.safetensors 1e-6 || false
}

@test "multi-turn records (completion_mask): 2 ranks with --zero 1 train the one-process step on the model's tokens" {
    needs_mpi
    ref make-turns "$(B)" turns.jsonl 97
    one --model "$TINY" --in turns.jsonl --out a --lr 1e-3 --beta 0.04 --loss dapo --metrics a.jsonl 2> /dev/null
    mpi 2 --model "$TINY" --in turns.jsonl --out b --lr 1e-3 --beta 0.04 --loss dapo --zero 1 --metrics b.jsonl 2> /dev/null
    same_step a b
    same_metrics a.jsonl b.jsonl
    # the mask reached every rank: without it the step is another one
    jq -c 'del(.completion_mask) | .logprobs = [.logprobs[] | if . == null then -1 else . end]' turns.jsonl > flat.jsonl
    one --model "$TINY" --in flat.jsonl --out c --lr 1e-3 --beta 0.04 --loss dapo 2> /dev/null
    ! ref close a/grpo/optimizer.safetensors c/grpo/optimizer.safetensors 1e-5 2> /dev/null || false
}

@test "SGD: the update of 3 ranks with --zero 1 is the one-process update to 1e-5" {
    needs_mpi
    # a large lr, so that the update is far above the float32 rounding of the weights
    one --model "$TINY" --in "$(B)" --out a --lr 100 --optimizer sgd --max-grad-norm 0 2> /dev/null
    mpi 3 --model "$TINY" --in "$(B)" --out b --lr 100 --optimizer sgd --max-grad-norm 0 --zero 1 2> /dev/null
    ref close-delta "$TINY/model.safetensors" a/model.safetensors b/model.safetensors 1e-5
}

@test "the same N writes the same bytes; --iterations 3 stays in step across ranks" {
    needs_mpi
    for run in a b; do
        mpi 3 --model "$TINY" --in "$(B)" --out "z-$run" --lr 1e-3 --zero 1 --iterations 3 --metrics "z-$run.jsonl" 2> /dev/null
        mpi 2 --model "$TINY" --in "$(B)" --out "p-$run" --lr 1e-3 --lora-r 4 2> /dev/null
    done
    diff -r z-a z-b
    diff -r p-a p-b
    one --model "$TINY" --in "$(B)" --out one3 --lr 1e-3 --iterations 3 --metrics one3.jsonl 2> /dev/null
    same_step one3 z-a
    same_metrics one3.jsonl z-a.jsonl
}

@test "resume with another N: the optimizer state on disk is whole" {
    needs_mpi
    mpi 2 --model "$TINY" --in "$(B)" --out s1 --lr 1e-3 --zero 1 2> /dev/null
    "$GRPO_PY" - s1 << 'EOF'
import sys
from safetensors.numpy import load_file
w = load_file(sys.argv[1] + "/model.safetensors")
o = load_file(sys.argv[1] + "/grpo/optimizer.safetensors")
assert len(o) == 2 * len(w)
for k, v in w.items():
    assert o["exp_avg." + k].shape == v.shape and o["exp_avg_sq." + k].shape == v.shape, k
    assert (o["exp_avg_sq." + k] != 0).any() or not v.any(), k  # every slice arrived
EOF
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch b2.jsonl 16 97 --seed 5
    one --model s1 --in b2.jsonl --out s2-1 --lr 1e-3 2> /dev/null
    mpi 3 --model s1 --in b2.jsonl --out s2-3 --lr 1e-3 --zero 1 2> /dev/null
    mpi 2 --model s1 --in b2.jsonl --out s2-2 --lr 1e-3 2> /dev/null
    same_step s2-1 s2-3
    same_step s2-1 s2-2
    grep -q '"step":2' s2-3/grpo/state.json
}

@test "more ranks than prompt groups: the idle rank is said, the step is the same" {
    needs_mpi
    one --model "$TINY" --in "$(B)" --out a --lr 1e-3 2> /dev/null
    run --separate-stderr mpi 5 --model "$TINY" --in "$(B)" --out b --lr 1e-3 --zero 1
    [ "$status" -eq 0 ]
    printf '%s\n' "$stderr" | grep -q "^grpo-update: 5 ranks, 4 prompt groups: 1 ranks have no share"
    same_step a b
}

# ranks_said N PATTERN: N lines of stderr start with "grpo-update: " and
# every one matches PATTERN (mpirun adds its own banner around them)
ranks_said() {
    local ours
    ours=$(printf '%s\n' "$stderr" | grep '^grpo-update: ')
    [ "$(printf '%s\n' "$ours" | grep -c '')" -eq "$1" ] || { echo "$stderr"; return 1; }
    if printf '%s\n' "$ours" | grep -Ev -- "$2"; then echo "lines above do not match /$2/"; return 1; fi
}

@test "ranks with different flags: 64 from every rank; different batches: 65; a missing batch: 66; nothing written" {
    needs_mpi
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch other.jsonl 16 97 --seed 9
    local u="grpo-update --threads 1 --model $TINY --out c"
    run --separate-stderr mpirun --bind-to none -np 1 $u --in "$(B)" --lr 1e-3 : -np 1 $u --in "$(B)" --lr 2e-3
    [ "$status" -eq 64 ]
    ranks_said 2 "the command line .* differs between ranks: rank 1's is not rank 0's"
    run --separate-stderr mpirun --bind-to none -np 1 $u --in "$(B)" : -np 1 $u --in "$(B)" --zero 1
    [ "$status" -eq 64 ]
    ranks_said 2 "differs between ranks"
    run --separate-stderr mpirun --bind-to none -np 2 $u --in "$(B)" : -np 1 $u --in other.jsonl
    [ "$status" -eq 65 ]
    ranks_said 3 "batch.jsonl: the batch \(its sha256\) differs between ranks|other.jsonl: the batch"
    run --separate-stderr mpi 2 --model "$TINY" --in missing.jsonl --out c
    [ "$status" -eq 66 ]
    ranks_said 2 "missing.jsonl: cannot open"
    [ ! -e c ]
    no_temp_left .
}

@test "srun without an MPI plugin (N tasks, MPI sees 1): 69 before any work" {
    needs_mpi
    SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 run grpo-update --model "$TINY" --in "$(B)" --out c
    [ "$status" -eq 69 ]
    assert_one_line_error grpo-update "the launcher started 2 tasks but MPI sees 1: with srun, give --mpi=pmix"
    [ ! -e c ]
}

@test "kill -9 of a rank mid-run: mpirun ends the job, the old checkpoint stays, the rerun gives the same bytes" {
    needs_mpi
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch big.jsonl 64 97 --seed 3
    mpi 2 --model "$TINY" --in "$(B)" --out ck --lr 1e-3 --beta 0 2> /dev/null
    cp -r ck ck.before
    mpi 2 --model ck --in big.jsonl --out want --lr 1e-3 --beta 0 --iterations 200 2> /dev/null
    timeout 120 mpirun --bind-to none -np 2 grpo-update --threads 1 --model ck --in big.jsonl --out ck --lr 1e-3 \
        --beta 0 --iterations 200 2> kill.log &
    local job=$! ranks=""
    for _ in $(seq 100); do
        ranks=$(pgrep -f -- "^grpo-update --threads 1 --model ck --in big.jsonl" || true)
        [ "$(printf '%s\n' "$ranks" | grep -c .)" -eq 2 ] && break
        sleep 0.05
    done
    sleep 0.3
    kill -9 "$(printf '%s\n' "$ranks" | tail -n 1)"
    local status=0
    wait "$job" || status=$?
    [ "$status" -ne 0 ]
    [ "$status" -ne 124 ]   # ended by mpirun, not by the timeout
    grep -q "exited on signal 9" kill.log
    diff -r ck.before ck
    no_temp_left .
    mpi 2 --model ck --in big.jsonl --out ck --lr 1e-3 --beta 0 --iterations 200 2> /dev/null
    diff -r want/model.safetensors ck/model.safetensors
    diff -r want/grpo ck/grpo
}

@test "SmolLM2-135M, LoRA, 2 ranks: the one-process step; with --group-sums to 1e-6" {
    needs_mpi
    local smol="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    [ -e "$smol" ] || skip "no SmolLM2 (make models)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch smol.jsonl 8 49152 --seed 4
    one --model "$smol" --in smol.jsonl --out a --lr 1e-4 --lora-r 8 --beta 0 2> /dev/null
    mpi 2 --model "$smol" --in smol.jsonl --out b --lr 1e-4 --lora-r 8 --beta 0 --zero 1 2> /dev/null
    # as same_step; the gradient of this deeper model sums more terms [3e-5]
    ref close a/grpo/optimizer.safetensors b/grpo/optimizer.safetensors 1e-4
    ref close a/adapter_model.safetensors b/adapter_model.safetensors 0.1
    # --group-sums: the step to 1e-6 relative, element by element
    one --model "$smol" --in smol.jsonl --out ga --lr 1e-4 --lora-r 8 --beta 0 --group-sums 2> /dev/null
    mpi 2 --model "$smol" --in smol.jsonl --out gb --lr 1e-4 --lora-r 8 --beta 0 --zero 1 --group-sums 2> /dev/null
    ref close-each ga/adapter_model.safetensors gb/adapter_model.safetensors 1e-6
    ref close-each ga/grpo/optimizer.safetensors gb/grpo/optimizer.safetensors 1e-6
}

@test "SmolLM2-135M, full fine-tuning, 3 ranks, --group-sums: the one-process step to 1e-6" {
    needs_mpi
    local smol="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    [ -e "$smol" ] || skip "no SmolLM2 (make models)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch smol.jsonl 12 49152 --seed 4
    one --model "$smol" --in smol.jsonl --out fa --lr 1e-5 --beta 0 --group-sums 2> /dev/null
    mpi 3 --model "$smol" --in smol.jsonl --out fb --lr 1e-5 --beta 0 --group-sums 2> /dev/null
    ref close-each fa/model.safetensors fb/model.safetensors 1e-6
    ref close-each fa/grpo/optimizer.safetensors fb/grpo/optimizer.safetensors 1e-6
    # the step moved: the moments are not all zero
    "$GRPO_PY" -c 'import sys, numpy as np; from safetensors.numpy import load_file as l
sys.exit(0 if any(np.abs(v).max() > 0 for v in l(sys.argv[1]).values()) else 1)' fa/grpo/optimizer.safetensors
}

@test "pipelines/grpo.mk: UPDATE_LAUNCH goes before grpo-update, and only there" {
    needs_tiny
    run make -n -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=r MODEL="$TINY" UPDATE_LAUNCH='mpirun -np 2' step-0000
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | grep -c 'mpirun -np 2')" -eq 1 ]
    printf '%s\n' "$output" | grep -q "mpirun -np 2 $GRPO_ROOT/bin/grpo-update --model $TINY "
    run make -n -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=r MODEL="$TINY" step-0000
    printf '%s\n' "$output" | grep -q "; *$GRPO_ROOT/bin/grpo-update --model $TINY "
}

@test "the Slurm recipes are valid shell" {
    for f in "$GRPO_ROOT"/pipelines/slurm/*.sbatch "$GRPO_ROOT"/pipelines/slurm/*.sh; do
        [ -e "$f" ] || continue
        bash -n "$f"
    done
    [ -e "$GRPO_ROOT/pipelines/slurm/grpo-step.sbatch" ]
}

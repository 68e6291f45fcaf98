#!/usr/bin/env bats
# pipelines/grpo.mk with ROLLOUT_SERVER and SERVER_SYNC=lora on the tiny
# random llama: tests/ref/rollout_server.py stands in for vLLM and SGLang
# (neither can run here), and says which adapter directory was loaded under
# the name each generation request asked for. A 3-step LoRA run: checkpoint
# 0 (the model itself) is asked for without an adapter, checkpoints 1 and 2
# have their PEFT export loaded in place before their step's rollout, whose
# every request asks for it; the records name the checkpoint and step that
# sampled them. With ASYNC=1 (make -j2) the sampling checkpoint's export is
# the one loaded. A full fine-tuning run (no adapter) is refused by make.
# needs: venv
load helpers
unset MAKEFLAGS MFLAGS MAKELEVEL

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    make_tiny_llama "$TINY"
}

setup() {
    server_setup
    needs_tiny
}

teardown() { server_stop; }

mk() { local run=$1; shift; make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN="$run" "$@"; }

# config RUN KIND [LINES...]: 3 LoRA steps of 4 prompts x 2 completions, sampled by the stand-in of KIND at $URL
config() {
    mkdir -p "$1"
    cat > "$1/config.mk" << CFG
MODEL = $TINY
PREP_FLAGS = --task arith --n 20 --split train --seed 1 --chat-template raw --word-problems 0 --model $TINY
STEPS = 3
PROMPTS_PER_STEP = 4
K = 2
MAX_NEW_TOKENS = 4
# not flat: the adapter moves
REWARD = jq -c '.rewards = {s: .sample} | .reward = .rewards.s'
UPDATE_FLAGS = --lr 1e-3 --beta 0 --lora-r 4 --threads 1
TENSORBOARD =
PROGRESS = 0
ROLLOUT_SERVER = $URL
SERVER_FLAGS = --server-kind $2
SERVER_SYNC = lora
CFG
    printf '%s\n' "${@:3}" >> "$1/config.mk"
}

# records RUN N: step N's rollout records, one JSON array
records() { zstd -dc "$1/steps/$2/rollouts.jsonl.zst" | jq -s -c .; }

@test "SERVER_SYNC=lora, vLLM: each checkpoint's export is loaded in place before its step, every request asks for it" {
    rollout_server_start vllm
    config run vllm
    mk run || { cat run/steps/*/rollout.log run/server/lora/*.log; false; }
    [ -e run/ckpt/0003/grpo/state.json ]
    local lora n
    lora="$(realpath run)/server/lora"
    # the exports of checkpoints 1 and 2 (checkpoint 0 is the server's model itself), loaded in order
    for n in 0001 0002; do
        [ -s "run/server/lora/$n/adapter_config.json" ] && [ -s "run/server/lora/$n/adapter_model.safetensors" ]
    done
    [ ! -e run/server/lora/0000 ]
    ! cmp -s run/server/lora/0001/adapter_model.safetensors run/server/lora/0002/adapter_model.safetensors
    [ "$(stats_of)" = "[[[\"grpo-policy\",\"$lora/0001\"],[\"grpo-policy\",\"$lora/0002\"]],{\"\":8,\"$lora/0001\":8,\"$lora/0002\":8}]" ]
    # step N's records: checkpoint N, its step, and the adapter loaded for it
    for n in 0000 0001 0002; do
        records run "$n" | jq -e --arg n "$n" --arg p "$lora/$n" 'length == 8 and all(.[];
            .policy == "ckpt/" + $n and .policy_step == ($n | tonumber) and .sampler.engine == "vllm" and
            (if $n == "0000" then (.sampler | has("adapter") | not)
             else .sampler.adapter == "grpo-policy" and .sampler.adapter_path == $p end))'
    done
    # a rerun does nothing: nothing exported, loaded or sampled again
    mk run
    [ "$(curl -s "$URL/stats" | jq '[.generate, (.loads | length)]' -c)" = '[24,2]' ]
}

@test "SERVER_SYNC=lora, SGLang with ASYNC=1: the sampling checkpoint's export, under SERVER_LORA_NAME" {
    rollout_server_start sglang
    config run sglang "ASYNC = 1" "KEEP = 1" "SERVER_LORA_NAME = run b"
    mk run -j2 || { cat run/steps/*/rollout.log run/server/lora/*.log; false; }
    local lora
    lora="$(realpath run)/server/lora"
    # steps 0 and 1 sample with checkpoint 0 (the model), step 2 with checkpoint 1's adapter
    [ "$(stats_of)" = "[[[\"run b\",\"$lora/0001\"]],{\"\":16,\"$lora/0001\":8}]" ]
    [ "$(jq -r '.lora_path // "-"' requests.log | sort | uniq -c | tr -s ' ')" = "$(printf ' 16 -\n 8 run b')" ]
    records run 0001 | jq -e 'all(.[]; .policy == "ckpt/0000" and .policy_step == 0 and (.sampler | has("adapter") | not))'
    records run 0002 | jq -e --arg p "$lora/0001" 'all(.[]; .policy == "ckpt/0001" and .policy_step == 1 and
        .sampler.engine == "sglang" and .sampler.adapter == "run b" and .sampler.adapter_path == $p)'
    # KEEP=1 (raised to the 2 that ASYNC samples with) pruned checkpoint 1 and its export with it
    [ ! -e run/ckpt/0001 ] && [ ! -e run/server/lora/0001 ]
    [ -e run/ckpt/0002 ] && [ -e run/ckpt/0003 ]
}

@test "SERVER_SYNC=lora is refused for a full fine-tuning run and without ROLLOUT_SERVER, naming the fix" {
    URL=http://127.0.0.1:9
    config run vllm "UPDATE_FLAGS = --lr 1e-3 --beta 0"
    run mk run
    [ "$status" -ne 0 ]
    [[ "$output" == *"SERVER_SYNC=lora loads the run's LoRA adapter, and this run trains none (full fine-tuning): add --lora-r R to UPDATE_FLAGS, or use SERVER_SYNC=restart"* ]]
    [ ! -e run/steps ]
    config run vllm "UPDATE_FLAGS = --lr 1e-3 --lora-r=0"
    run mk run
    [ "$status" -ne 0 ]
    [[ "$output" == *"this run trains none (full fine-tuning)"* ]]
    config run vllm "ROLLOUT_SERVER ="
    run mk run
    [ "$status" -ne 0 ]
    [[ "$output" == *"SERVER_SYNC=lora needs ROLLOUT_SERVER"* ]]
    [ ! -e run/steps ]
}

# stats_of: the stand-in's loads and the adapter directory each request was answered with
stats_of() { curl -s "$URL/stats" | jq -c '[.loads, .generated_with]'; }

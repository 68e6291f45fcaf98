#!/usr/bin/env bats
# grpo-rollout --server --server-lora against tests/ref/rollout_server.py, the
# stand-in for vLLM and SGLang (neither can run here): the adapter is loaded
# under its name before any sample (vLLM in place, SGLang after unloading the
# name; the stand-in refuses a body with other fields than their
# documentation's, a relative path, a second SGLang load of a name), every
# generation request then names it, and the records say so. A load the
# server refuses is 69, one line, nothing written; llama.cpp's server cannot
# load an adapter at run time: 64 before any request. The tokenizer is
# tests/fixtures/tiny-tokenizer.
load helpers

setup() {
    server_setup
    # an adapter directory as grpo-export --format peft writes one (the stand-in reads only its config)
    mkdir -p exports/step1 exports/step2 notadapter
    echo '{"peft_type":"LORA","r":4}' > exports/step1/adapter_config.json
    echo '{"peft_type":"LORA","r":4}' > exports/step2/adapter_config.json
}

teardown() { server_stop; }

rollout() { # flags...
    grpo-rollout --model "$TOK" --server "$URL" -k 2 --max-new-tokens 3 --temperature 1 --seed 5 --in prompts.jsonl "$@"
}

stats() { curl -s "$URL/stats"; }

@test "vllm and sglang: the adapter is loaded under its name by its absolute path, and every request asks for it" {
    local kind
    for kind in vllm sglang; do
        rm -f requests.log
        rollout_server_start "$kind"
        run --separate-stderr rollout --server-lora exports/step1 --out "out-$kind.jsonl"
        [ "$status" -eq 0 ] || { echo "$kind: $stderr"; false; }
        [ "$(wc -l < "out-$kind.jsonl")" -eq 4 ]
        # one load, by the absolute path, before the 4 requests, each of which named it
        [ "$(stats | jq -c '[.loads, .generated_with]')" = "[[[\"grpo-policy\",\"$T/exports/step1\"]],{\"$T/exports/step1\":4}]" ]
        if [ "$kind" = vllm ]; then
            [ "$(jq -r .model requests.log | sort -u)" = grpo-policy ]
        else
            [ "$(jq -r .lora_path requests.log | sort -u)" = grpo-policy ]
        fi
        # the records name the adapter (the policy by default) and where it was loaded from
        jq -e -s --arg k "$kind" --arg p "$T/exports/step1" 'all(.[]; .policy == "grpo-policy" and
            .sampler.engine == $k and .sampler.model == "fake" and .sampler.adapter == "grpo-policy" and
            .sampler.adapter_path == $p and (.sampler | keys_unsorted | last) == "logprobs")' "out-$kind.jsonl"
        # the next checkpoint's adapter replaces it under the same name: vLLM in place, SGLang unloads first
        rm requests.log
        run --separate-stderr rollout --server-lora "$T/exports/step2/" --policy-step 2 --out "out2-$kind.jsonl"
        [ "$status" -eq 0 ] || { echo "$kind: $stderr"; false; }
        [ "$(stats | jq -c '[.loads[1], .unloads, .adapters, .generated_with]')" = \
            "[[\"grpo-policy\",\"$T/exports/step2\"],$([ "$kind" = sglang ] && echo 1 || echo 0),{\"grpo-policy\":\"$T/exports/step2\"},{\"$T/exports/step1\":4,\"$T/exports/step2\":4}]" ]
        jq -e -s 'all(.[]; .policy_step == 2)' "out2-$kind.jsonl"
        server_stop
    done
    # the same seeds: the same tokens whichever server and adapter
    [ "$(jq -c .completion_tokens out-vllm.jsonl)" = "$(jq -c .completion_tokens out2-sglang.jsonl)" ]
}

@test "--server-lora-name names it; policy_step is the adapter directory's checkpoint step; without it the model" {
    rollout_server_start vllm
    mkdir -p exports/step1/grpo
    echo '{"step": 7}' > exports/step1/grpo/state.json
    run --separate-stderr rollout --server-lora exports/step1 --server-lora-name "policy \"x\"" --out out.jsonl
    [ "$status" -eq 0 ] || { echo "$stderr"; false; }
    jq -e -s 'all(.[]; .policy == "policy \"x\"" and .sampler.adapter == "policy \"x\"" and .policy_step == 7)' out.jsonl
    [ "$(jq -r .model requests.log | sort -u)" = 'policy "x"' ]
    # a rollout without --server-lora asks for the model itself, whatever adapter is loaded
    rm requests.log
    run --separate-stderr rollout --out base.jsonl
    [ "$status" -eq 0 ]
    [ "$(jq -r .model requests.log | sort -u)" = fake ]
    jq -e -s 'all(.[]; .policy == "fake" and .policy_step == 0 and (.sampler | has("adapter") | not))' base.jsonl
    [ "$(stats | jq -c .generated_with)" = "{\"$T/exports/step1\":4,\"\":4}" ]
}

@test "a load the server refuses: 69 in one line naming it and what the server needs, nothing written or sampled" {
    local kind
    for kind in vllm sglang; do
        rollout_server_start "$kind" --fault loadfail
        run --separate-stderr rollout --server-lora exports/step1 --out out.jsonl
        [ "$status" -eq 69 ] || { echo "$kind: $status $stderr"; false; }
        [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
        [[ "$stderr" == "grpo-rollout: --server-lora $T/exports/step1: server: HTTP 400 from $URL"*"load_lora_adapter: Loading lora grpo-policy failed"*"--enable-lora"* ]]
        [ ! -e out.jsonl ]
        [ "$(stats | jq .generate)" -eq 0 ]
        server_stop
    done
    # vLLM started without VLLM_ALLOW_RUNTIME_LORA_UPDATING has no such endpoint: 404, named
    rollout_server_start llamacpp
    run --separate-stderr rollout --server-kind vllm --server-lora exports/step1 --out out.jsonl
    [ "$status" -eq 69 ]
    [[ "$stderr" == *"HTTP 404 from $URL/v1/load_lora_adapter"*"VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"* ]]
    [ ! -e out.jsonl ]
    # the server gone: 69 naming the URL
    server_stop
    run --separate-stderr rollout --server-lora exports/step1 --out out.jsonl
    [ "$status" -eq 69 ]
    [[ "$stderr" == *"cannot connect to $URL/v1/models"* ]]
    [ ! -e out.jsonl ]
}

@test "llama.cpp: --server-lora is refused (64) before any request, naming SERVER_SYNC=restart" {
    rollout_server_start llamacpp
    local kind
    for kind in llamacpp auto; do
        run --separate-stderr rollout --server-kind "$kind" --server-lora exports/step1 --out out.jsonl
        [ "$status" -eq 64 ]
        [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
        [[ "$stderr" == "grpo-rollout: --server-lora: llama.cpp's server cannot load an adapter at run time"*"SERVER_SYNC=restart"* ]]
        [ ! -e out.jsonl ]
    done
    [ "$(stats | jq -c '[.generate, .loads]')" = '[0,[]]' ]
}

@test "usage: --server-lora needs --server and an adapter directory; --server-lora-name needs --server-lora" {
    run --separate-stderr grpo-rollout --model "$TOK" --server-lora exports/step1 --in prompts.jsonl
    [ "$status" -eq 64 ]
    [[ "$stderr" == *"--server-lora needs --server URL"* ]]
    URL=http://127.0.0.1:9
    run --separate-stderr rollout --server-lora-name x --out out.jsonl
    [ "$status" -eq 64 ]
    [[ "$stderr" == *"--server-lora-name needs --server-lora DIR"* ]]
    # checked before the server is asked anything (nothing listens at URL)
    run --separate-stderr rollout --server-lora missing --out out.jsonl
    [ "$status" -eq 66 ]
    [[ "$stderr" == "grpo-rollout: --server-lora missing: No such file or directory" ]]
    run --separate-stderr rollout --server-lora notadapter --out out.jsonl
    [ "$status" -eq 66 ]
    [[ "$stderr" == *"--server-lora notadapter: no adapter_config.json: not a PEFT adapter directory"* ]]
    run --separate-stderr rollout --server-lora exports/step1 --server-lora-name "" --out out.jsonl
    [ "$status" -eq 64 ]
    [ ! -e out.jsonl ]
}

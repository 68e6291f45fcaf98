#!/usr/bin/env bats
# grpo-rollout --server against a real server: llama.cpp's llama-server
# (built from the pinned source by `make llama-server`) serving SmolLM2 (make
# models) exported to an f32 GGUF, with an f32 KV cache and flash attention
# off, so that its arithmetic is float32 as our trainer's is. Records are
# well formed, their tokens decode (llama.cpp's /detokenize) to their text,
# and at temperature 1 without truncation their log-probabilities are the
# trainer's (grpo-update --is-correction measures |logpi_old - logpi_sampler|
# per token: mean and max). Multi-turn episodes go through it token in,
# token out. Skips, naming what is missing, where llama-server or the model
# is not there.
# needs: models
load helpers

SMOL="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA_SERVER="$GRPO_ROOT/build/llama.cpp-native/bin/llama-server"

setup_file() {
    [ -x "$LLAMA_SERVER" ] && [ -f "$SMOL" ] || return 0
    cd "$BATS_FILE_TMPDIR" || return 1
    grpo-export --model "$SMOL" --format gguf --dtype f32 --out smol-f32.gguf
    # -nr: ggml's AMX repacking crashes under hypervisors that report AMX without enabling it
    "$LLAMA_SERVER" --host 127.0.0.1 --port 0 -m smol-f32.gguf -np 4 -c 8192 -ctk f32 -ctv f32 -fa off -nr \
        --no-webui > server.log 2>&1 3>&- &
    echo $! > server.pid
    local i addr=
    for ((i = 0; i < 1500; i++)); do
        addr=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' server.log | head -1)
        [ -n "$addr" ] && curl -sf "$addr/health" > /dev/null && break
        kill -0 "$(cat server.pid)" 2> /dev/null || { cat server.log >&2; return 1; }
        sleep 0.2
    done
    echo "$addr" > url
    grpo-prep --task arith --n 3 --seed 3 --model "$SMOL" --out prompts.jsonl
}

teardown_file() {
    [ -f "$BATS_FILE_TMPDIR/server.pid" ] || return 0
    kill "$(cat "$BATS_FILE_TMPDIR/server.pid")" 2> /dev/null || true
}

setup() {
    [ -x "$LLAMA_SERVER" ] || skip "no llama-server (make llama-server builds it)"
    [ -f "$SMOL" ] || skip "no SmolLM2 GGUF (make models)"
    cd "$BATS_FILE_TMPDIR" || return 1
    URL=$(cat url)
    [[ "$URL" == http://127.0.0.1:* ]]
}

@test "llama-server: records well formed, sampler named, tokens decode to their text" {
    grpo-rollout --model "$SMOL" --server "$URL" -k 2 --max-new-tokens 16 --temperature 1 --top-p 1 --top-k 0 \
        --min-p 0 --seed 4 --in prompts.jsonl --out t1.jsonl
    [ "$(wc -l < t1.jsonl)" -eq 6 ]
    jq -e -s 'map(.sample) == [0, 1, 0, 1, 0, 1] and all(.[];
        (.completion_tokens | length) == (.logprobs | length) and (.completion_tokens | length) > 0 and
        (.completion_tokens | length) <= 16 and all(.logprobs[]; . <= 0) and .temperature == 1 and
        (.finish_reason == "stop" or .finish_reason == "length") and .policy == "smol-f32.gguf" and
        .sampler == {engine: "llamacpp", model: "smol-f32.gguf", logprobs: "processed"} and
        (keys_unsorted | last) == "sampler")' t1.jsonl
    # the text is the tokens decoded, special tokens left out (the end token is kept in the
    # tokens; SmolLM2's special tokens are ids 0-16, which /detokenize would spell out)
    local rec text
    while IFS= read -r rec; do
        text=$(jq -c '{tokens: .completion_tokens | map(select(. > 16))}' <<< "$rec" |
            curl -sf "$URL/detokenize" -d @- | jq -r .content)
        [ "$text" = "$(jq -r .completion <<< "$rec")" ] || { echo "text differs: $rec"; false; }
    done < t1.jsonl
    # greedy: log-probabilities of softmax(logits) (formats/rollout.md), so "raw"
    grpo-rollout --model "$SMOL" --server "$URL" -k 1 --max-new-tokens 4 --temperature 0 --in prompts.jsonl \
        --out t0.jsonl
    jq -e -s 'all(.[]; .sampler.logprobs == "raw" and .temperature == 0)' t0.jsonl
}

@test "llama-server at temperature 1, no truncation: its log-probabilities are the trainer's within 1e-4" {
    grpo-rollout --model "$SMOL" --server "$URL" -k 2 --max-new-tokens 16 --temperature 1 --top-p 1 --top-k 0 \
        --min-p 0 --seed 5 --in prompts.jsonl --out t1.jsonl
    grpo-reward --fn length --max-len 16 --in t1.jsonl | grpo-advantage --scale none > batch.jsonl
    grpo-update --model smol-f32.gguf --in batch.jsonl --out ckpt --lr 1e-6 --lora-r 4 --beta 0 \
        --is-correction token --metrics m.jsonl
    echo "# |logpi_trainer - logpi_llama-server| per token: $(jq -c '{mean: ."sampling/sampling_logp_difference/mean",
        max: ."sampling/sampling_logp_difference/max", tokens: .tokens}' m.jsonl)" >&3
    # measured: mean 3e-6, max 3e-5 (float32 sums in another order)
    jq -e '."sampling/sampling_logp_difference/mean" < 1e-5 and ."sampling/sampling_logp_difference/max" < 1e-4' m.jsonl
}

@test "llama-server runs multi-turn episodes: the environment's tokens appended, mask 0 and null log-probabilities" {
    printf '%s\n' '{"id":"g1","messages":[{"role":"user","content":"Guess my number between 1 and 9. Answer with one number."}],"secret":7}' \
        '{"id":"g2","messages":[{"role":"user","content":"Guess my number between 1 and 9. Answer with one number."}],"secret":3}' \
        > guess.jsonl
    grpo-rollout --model "$SMOL" --server "$URL" -k 2 --max-new-tokens 6 --max-turns 3 --temperature 1 --seed 2 \
        --env "python3 -u $GRPO_ROOT/scripts/env/guess.py" --in guess.jsonl --out ep.jsonl
    [ "$(wc -l < ep.jsonl)" -eq 4 ]
    jq -e -s 'all(.[];
        (.completion_mask | length) == (.completion_tokens | length) and
        ([.completion_mask, .logprobs] | transpose | all(.[]; (.[0] == 1) == (.[1] | type == "number"))) and
        (.finish_reason | IN("env", "turns", "length")) and (.turns | length) >= 1 and
        .sampler.engine == "llamacpp")' ep.jsonl
    # an episode of more than one turn: what the environment said is in its tokens, decoded as the chat template writes it
    local rec env
    rec=$(jq -c 'select((.turns | length) > 1)' ep.jsonl | head -1)
    [ -n "$rec" ] || skip "no episode went past its first turn with these seeds"
    env=$(jq -c '{tokens: [.completion_tokens, .completion_mask] | transpose | map(select(.[1] == 0) | .[0])}' \
        <<< "$rec" | curl -sf "$URL/detokenize" -d @- | jq -r .content)
    [[ "$env" == *"$(jq -r '.turns[1].content' <<< "$rec")"* ]]
}

#!/usr/bin/env bats
# grpo-reward --fn judge against a real LLM judge: scripts/judge-server
# (llama.cpp's llama-server serving SmolLM2-135M-Instruct as `smollm2`) on a
# free port, the README's template examples/judge.txt, three rollout records.
# A 135M judge grades poorly, so the test checks the form of its scores (a
# number, or null counted `unparsed` as formats/judge.md says), not their
# values, and that a rerun is answered from the cache with no request.
# Runs where `make llama-server` and `make models` have been run; skips
# (naming them) elsewhere.
load helpers

teardown() {
    if [ -n "${JUDGE_PID:-}" ]; then
        kill "$JUDGE_PID" 2> /dev/null || true
        wait "$JUDGE_PID" 2> /dev/null || true
    fi
}

setup() {
    LLAMA_SERVER=$GRPO_ROOT/build/llama.cpp-native/bin/llama-server
    [ -x "$LLAMA_SERVER" ] || skip "no llama-server (make llama-server builds it)"
    [ -f "$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf" ] || skip "no SmolLM2 GGUF (make models)"
    T="$BATS_TEST_TMPDIR"
    cd "$T" || return 1
}

# start_judge: scripts/judge-server on a free port; sets JUDGE_PID and URL
# once the model answers.
start_judge() {
    "$GRPO_ROOT/scripts/judge-server" --port 0 --slots 2 --threads 2 > url 2> judge.err 3>&- &
    JUDGE_PID=$!
    local i
    for ((i = 0; i < 1200; i++)); do
        [ -s url ] && break
        kill -0 "$JUDGE_PID" 2> /dev/null || { cat judge.err >&2; return 1; }
        sleep 0.1
    done
    URL=$(cat url)
    [[ "$URL" == http://127.0.0.1:*/v1 ]]
}

judge() { # extra flags...
    grpo-reward --fn judge --judge-url "$URL" --judge-model smollm2 --judge-template "$GRPO_ROOT/examples/judge.txt" \
        --judge-max-tokens 8 --judge-cache "$T/judge.sqlite" --in in.jsonl "$@"
}

@test "judge-server: SmolLM2 under llama-server judges rollouts; a rerun makes no request" {
    start_judge
    printf '%s\n' \
        '{"id":"q1","sample":0,"messages":[{"role":"user","content":"What is 7 * 8?"}],"answer":"56","completion":"7 * 8 = 56. The answer is 56."}' \
        '{"id":"q1","sample":1,"messages":[{"role":"user","content":"What is 7 * 8?"}],"answer":"56","completion":"7 * 8 = 54. The answer is 54."}' \
        '{"id":"q2","sample":0,"messages":[{"role":"user","content":"Tom has 3 apples and buys 4 more. How many?"}],"answer":"7","completion":"3 + 4 = 7, so Tom has 7 apples."}' \
        > in.jsonl
    judge --out out1.jsonl --stats st1.json --quiet
    echo "# scores: $(jq -c -s 'map(.rewards.judge)' out1.jsonl), $(jq -c '.judge | {requests, unparsed}' st1.json)" >&3
    [ "$(wc -l < out1.jsonl)" -eq 3 ]
    jq -e '.judge.requests == 3 and .judge.misses == 3 and .judge.completion_tokens > 0' st1.json
    # each score a finite number, or null for a reply without one, counted unparsed
    jq -s -e 'all(.[]; .rewards.judge == null or (.rewards.judge | type == "number" and isinfinite | not))' out1.jsonl
    nulls=$(jq -s 'map(select(.rewards.judge == null)) | length' out1.jsonl)
    jq -e --argjson n "$nulls" '.judge.unparsed == $n' st1.json
    # the rerun: every answer from the cache, no request, the same bytes
    judge --out out2.jsonl --stats st2.json --quiet
    jq -e '.judge.hits == 3 and .judge.requests == 0' st2.json
    cmp out1.jsonl out2.jsonl
    # the server stops with the script
    kill "$JUDGE_PID"
    wait "$JUDGE_PID" || true
    JUDGE_PID=
    ! curl -sf "${URL%/v1}/health"
}

#!/usr/bin/env bats
# grpo-rollout --env: multi-turn episodes against an environment program
# (tests/ref/test_env.py answers by a fixed script or misbehaves on
# purpose), on tiny random llamas with ChatML (Qwen2.5 template) and Llama 3.1
# tokenizers (tests/ref/check_env_prefix.py make).
# needs: venv
load helpers

setup_file() {
    export CHATML="$BATS_FILE_TMPDIR/chatml" LLAMA3="$BATS_FILE_TMPDIR/llama3"
    export ENV="$GRPO_PY -u $GRPO_ROOT/tests/ref/test_env.py"
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_env_prefix.py" make chatml "$CHATML"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_env_prefix.py" make llama3 "$LLAMA3"
    printf '%s\n' '{"id":"a","messages":[{"role":"user","content":"What is 6 times 7?"}],"x":1e400}' \
        '{"id":"b","messages":[{"role":"system","content":"Be exact."},{"role":"user","content":"Add 2 and 40."}]}' \
        '{"id":"c","messages":[{"role":"user","content":"Count to three."}]}' > "$BATS_FILE_TMPDIR/prompts.jsonl"
    printf '%s\n' '[{"type": "function", "function": {"name": "calc", "description": "Evaluates arithmetic.",' \
        '"parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}}}]' \
        > "$BATS_FILE_TMPDIR/tools.json"
}

# same_records A B: byte for byte where the weights are packed for our own
# kernel (AVX-512, or AVX2 with FMA); elsewhere OpenBLAS's sums follow the rows batched together,
# which in a multi-turn run follow when the answers came: the same tokens,
# masks, turns and finish reasons, log-probabilities within 1e-5
# (formats/rollout.md, "Sampling and determinism").
same_records() {
    if grep -qw avx512f /proc/cpuinfo || { grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; }; then
        cmp "$1" "$2"
        return
    fi
    local key='[.id, .sample, .prompt_tokens, .completion_tokens, .completion_mask, .turns, .finish_reason, .env_reward]'
    diff <(jq -c "$key" "$1") <(jq -c "$key" "$2")
    paste <(jq -c .logprobs "$1") <(jq -c .logprobs "$2") | jq -R -e 'split("\t") | map(fromjson) | transpose
        | all(.[]; (.[0] == null and .[1] == null) or ((.[0] - .[1]) | fabs < 1e-5))' > /dev/null
}

needs_fixture() { [ -d "$CHATML" ] || skip "no test venv (make venv)"; }
P() { echo "$BATS_FILE_TMPDIR/prompts.jsonl"; }
TOOLS() { echo "$BATS_FILE_TMPDIR/tools.json"; }

@test "--help describes --env, --max-turns, --max-total-tokens, --env-timeout, --tools; the env-only flags need --env" {
    run grpo-rollout --help
    [ "$status" -eq 0 ]
    for f in --env --max-turns --max-total-tokens --env-timeout --tools; do
        printf '%s\n' "$output" | grep -Eq "^  $f " || { echo "no $f"; false; }
    done
    printf '%s\n' "$output" | grep -q 'completion_mask'
    for f in "--max-turns 2" "--max-total-tokens 9" "--env-timeout 3"; do
        run grpo-rollout --model x $f
        [ "$status" -eq 64 ]
        assert_one_line_error grpo-rollout "${f%% *} needs --env PROGRAM"
    done
}

@test "an episode: tokens of every turn, completion_mask, null logprobs at the environment's tokens, turns, env_reward" {
    needs_fixture
    grpo-rollout --model "$CHATML" -k 2 --max-new-tokens 5 --in "$(P)" --out r.jsonl --env "$ENV log req.jsonl"
    [ "$(wc -l < r.jsonl)" -eq 6 ]
    [ "$(jq -r '"\(.id)/\(.sample)"' r.jsonl | tr '\n' ' ')" = "a/0 a/1 b/0 b/1 c/0 c/1 " ]
    # the prompt's fields first and untouched, then the rollout's in order
    head -n 1 r.jsonl | grep -q '^{"id":"a","messages":\[{"role":"user","content":"What is 6 times 7?"}\],"x":1e400,"sample":0,"prompt_tokens":'
    [ "$(head -n 1 r.jsonl | jq -c 'keys_unsorted[3:]')" = '["sample","prompt_tokens","completion_tokens","completion_mask","completion","logprobs","temperature","finish_reason","turns","env_reward","policy","policy_step","sampler"]' ]
    jq -e '(.completion_mask | length) == (.completion_tokens | length)
           and (.logprobs | length) == (.completion_tokens | length)
           and ([.completion_mask, .logprobs] | transpose | all(.[]; (.[0] == 1) == (.[1] != null)))
           and ([.turns[].role] == ["assistant", "tool", "user", "assistant", "user", "assistant"])
           and .completion == .turns[-1].content and .finish_reason == "env" and .env_reward == 1.5
           and ([.completion_mask[] | select(. == 1)] | length) <= 15 and .completion_mask[0] == 1' r.jsonl > /dev/null
    # the environment's tokens of turn 0: the rendered continuation, a tool response in a user turn, then the user
    jq -r 'select(.sample == 0 and .id == "a") | [.completion_tokens, .completion_mask] | transpose
           | map(select(.[1] == 0) | .[0]) | @json' r.jsonl > env_ids.json
    "$GRPO_PY" -c 'import json, sys; from tokenizers import Tokenizer
t = Tokenizer.from_file(sys.argv[1]); print(t.decode(json.load(open(sys.argv[2])), skip_special_tokens=False))' \
        "$CHATML/tokenizer.json" env_ids.json > env_text.txt
    grep -q '<tool_response>' env_text.txt
    grep -q 'result: 42' env_text.txt
    grep -q '<|im_start|>user' env_text.txt
    # requests: the record's fields, sample, turn, the conversation so far, last only on the last turn allowed
    [ "$(wc -l < req.jsonl)" -eq 18 ]
    grep -q '^{"id":"a","messages":\[{"role":"user","content":"What is 6 times 7?"},{"role":"assistant",.*\],"x":1e400,"sample":0,"turn":0}$' req.jsonl
    jq -s -e 'map(select(.id == "a" and .sample == 0 and .turn == 1))[0] | (.messages | length) == 5
           and .messages[0].content == "What is 6 times 7?" and .messages[-1].role == "assistant"
           and (has("last") | not)' req.jsonl > /dev/null
    jq -s -e 'all(.[]; (.messages | length) - (if .id == "b" then 2 else 1 end) == [1, 4, 6][.turn])' req.jsonl > /dev/null
}

@test "--max-turns: the bound ends an episode with finish_reason turns; the last request says last" {
    needs_fixture
    grpo-rollout --model "$CHATML" -k 2 --max-new-tokens 4 --max-turns 2 --in "$(P)" --out r.jsonl --env "$ENV log req.jsonl"
    jq -e '.finish_reason == "turns" and .env_reward == 1 and ([.turns[].role] | length) == 4' r.jsonl > /dev/null
    [ "$(jq -c 'select(.last == true) | .turn' req.jsonl | sort -u)" = 1 ]
    grpo-rollout --model "$CHATML" -k 1 --max-new-tokens 4 --max-turns 1 --in "$(P)" --out one.jsonl --env "$ENV script" \
        --progress 2> err.txt
    grep -Eq '^grpo-rollout: env: 3 requests; [0-9.]+ s with every sequence waiting for an answer, [0-9.]+ s holding a decode step for answers due$' err.txt
    jq -e '.finish_reason == "turns" and .env_reward == 0 and (.completion_mask | all(. == 1))
           and (.turns | length) == 1' one.jsonl > /dev/null
}

@test "--max-total-tokens bounds the episode's tokens, the environment's included (finish_reason length)" {
    needs_fixture
    grpo-rollout --model "$CHATML" -k 2 --max-new-tokens 5 --max-total-tokens 40 --in "$(P)" --out r.jsonl --env "$ENV script"
    jq -e '(.completion_tokens | length) <= 40 and .finish_reason == "length"' r.jsonl > /dev/null
    # an answer that does not fit is not appended: the turns end with the assistant
    jq -e '.turns[-1].role == "assistant"' r.jsonl > /dev/null
}

@test "prefix property: prompt_tokens + completion_tokens are HF apply_chat_template's ids of the conversation (ChatML/Qwen2.5 and Llama 3.1, with --tools)" {
    needs_fixture
    [ -x "$GRPO_ROOT/.venv-peft/bin/python" ] || skip "no .venv-peft (transformers)"
    for m in "$CHATML" "$LLAMA3"; do
        for tools in "" "--tools $(TOOLS)"; do
            grpo-rollout --model "$m" -k 4 --max-new-tokens 4 --in "$(P)" --out r.jsonl --env "$ENV script" $tools
            run "$GRPO_ROOT/.venv-peft/bin/python" "$GRPO_ROOT/tests/ref/check_env_prefix.py" check "$m" r.jsonl ${tools:+$(TOOLS)}
            echo "$output" | grep -v '^ok' || true
            [ "$status" -eq 0 ]
            # enough records round-trip to mean something (the rest sampled special tokens)
            [ "$(echo "$output" | sed -n 's/^# compared \([0-9]*\).*/\1/p')" -ge 3 ]
        done
    done
    # --tools renders the schemas into the prompt the family's way
    grpo-rollout --model "$CHATML" -k 1 --max-new-tokens 2 --in "$(P)" --out t.jsonl --tools "$(TOOLS)"
    ! jq -e 'has("completion_mask")' t.jsonl > /dev/null || false
}

@test "answers in any order; the same records on a rerun and across --batch, --threads and --shard" {
    needs_fixture
    args=(--model "$CHATML" -k 3 --max-new-tokens 5 --in "$(P)" --seed 7)
    grpo-rollout "${args[@]}" --batch 9 --out a.jsonl --env "$ENV reverse"
    grpo-rollout "${args[@]}" --batch 9 --out a2.jsonl --env "$ENV script"
    same_records a.jsonl a2.jsonl
    grpo-rollout "${args[@]}" --batch 3 --threads 1 --out b.jsonl --env "$ENV reverse"
    for i in 0 1; do grpo-rollout "${args[@]}" --shard $i/2 --out s$i.jsonl --env "$ENV script"; done
    # where OpenBLAS sums (float32 weights without AVX2/AVX-512: formats/rollout.md) its order may
    # follow the rows batched together: tokens, masks and turns the same, log-probabilities to 1e-5
    same_records a.jsonl b.jsonl
    # the shards' records are the whole run's (each line starts with its id and sample, so sorted
    # lines pair up)
    [ -s s0.jsonl ]
    [ -s s1.jsonl ]
    sort a.jsonl > all.jsonl
    cat s0.jsonl s1.jsonl | sort > shards.jsonl
    same_records all.jsonl shards.jsonl
}

@test "an answer prefilled in a call of its own, beside other sequences' decode rows, or with other answers: the same records" {
    needs_fixture
    for w in f32 bf16; do
        args=(--model "$CHATML" -k 3 --max-new-tokens 5 --in "$(P)" --seed 11 --batch 9 --weights $w)
        # one answer every 0.05 s: each continuation is prefilled while the others wait
        grpo-rollout "${args[@]}" --out alone.jsonl --env "$ENV sleep 0.05"
        # answered at once: continuations join the decode step of the sequences still generating
        grpo-rollout "${args[@]}" --out mixed.jsonl --env "$ENV script"
        # answers held 0.2 s and sent together: many continuations in one call
        grpo-rollout "${args[@]}" --out together.jsonl --env "$ENV reverse"
        same_records alone.jsonl mixed.jsonl
        same_records alone.jsonl together.jsonl
        [ "$(jq -s 'map(.turns | length) | add' alone.jsonl)" -gt 9 ]
    done
}

@test "while one episode waits for its answer, the others go on decoding" {
    needs_fixture
    head -n 1 "$(P)" > one.jsonl
    grpo-rollout --model "$CHATML" -k 4 --max-new-tokens 4 --in one.jsonl --out r.jsonl --env "$ENV slow0 3 req.jsonl"
    jq -e '.finish_reason == "env"' r.jsonl > /dev/null
    # samples 1-3 finished all their turns while sample 0 waited for its first answer
    order=$(jq -c '[.sample, .turn]' req.jsonl | tr '\n' ' ')
    echo "$order"
    before=${order%%'[0,1]'*}
    for s in 1 2 3; do [[ "$before" == *"[$s,2]"* ]] || { echo "sample $s did not finish first"; false; }; done
}

@test "a bad environment: one-line error naming the record and turn, exit 65 or 75, nothing written" {
    needs_fixture
    local mode code pattern
    while IFS='|' read -r mode code pattern; do
        run grpo-rollout --model "$CHATML" -k 2 --max-new-tokens 3 --env-timeout 1 --in "$(P)" --out out.jsonl --env "$ENV $mode"
        echo "$mode: $output"
        [ "$status" -eq "$code" ]
        assert_one_line_error grpo-rollout "$pattern"
        [ ! -e out.jsonl ]
        no_temp_left .
    done <<'CASES'
malformed|65|prompts.jsonl:[0-9]+: env '.*': answer 1 is not a JSON object .*record "a", sample [01], turn 0.*this is not JSON
unknown|65|prompts.jsonl:[0-9]+: env '.*': answer 1 answers a request never asked .*record "a", sample [01], turn 0
badrole|65|prompts.jsonl:1: env '.*': record "a", sample [01], turn 0: expected each message's "role" to be "user" or "tool"
die|65|prompts.jsonl:1: env '.*' exited with status 3 before answering record "a", sample [01], turn 0
silent|75|prompts.jsonl:1: env '.*' gave no answer for record "a", sample [01], turn 0 within 1 s \(--env-timeout
extra|65|env '.*' wrote more after its last answer
CASES
    run grpo-rollout --model "$CHATML" -k 1 --in "$(P)" --out out.jsonl --env "exit 0"
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-rollout "env 'exit 0' exited with status 0 before answering record \"[abc]\", sample 0, turn 0"
}

@test "--tools: a missing file is 66, not JSON or not schemas 65, before any work" {
    needs_fixture
    run grpo-rollout --model "$CHATML" --in "$(P)" --out o.jsonl --tools nothere.json
    [ "$status" -eq 66 ]
    assert_one_line_error grpo-rollout "--tools: .*nothere.json"
    echo '[{"type": "function",' > bad.json
    run grpo-rollout --model "$CHATML" --in "$(P)" --out o.jsonl --tools bad.json
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-rollout "--tools bad.json: not JSON"
    echo '[{"type": "function", "function": {"description": "no name"}}]' > noname.json
    run grpo-rollout --model "$CHATML" --in "$(P)" --out o.jsonl --tools noname.json
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-rollout "--tools noname.json: element 0: expected an OpenAI function schema"
    [ ! -e o.jsonl ]
}

@test "kill -9 during a multi-turn run: no output; the rerun gives the uninterrupted run's records" {
    needs_fixture
    args=(--model "$CHATML" -k 2 --max-new-tokens 4 --in "$(P)" --out r.jsonl)
    grpo-rollout "${args[@]}" --env "$ENV script"
    mv r.jsonl whole.jsonl
    # sample 0's first answer comes 5 s late, so the run is still going when killed
    grpo-rollout "${args[@]}" --env "$ENV slow0 5 req.jsonl" &
    pid=$!
    for _ in $(seq 100); do [ -s req.jsonl ] && break; sleep 0.05; done
    [ -s req.jsonl ]
    kill -9 "$pid"
    wait "$pid" || true
    [ ! -e r.jsonl ]
    grpo-rollout "${args[@]}" --env "$ENV script"
    same_records r.jsonl whole.jsonl
    no_temp_left .
}

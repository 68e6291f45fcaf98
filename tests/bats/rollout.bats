#!/usr/bin/env bats
# grpo-rollout on a tiny random llama (with a 97-token byte-level tokenizer)
# for the mechanics, and once on SmolLM2. Log-probabilities are checked
# against the float64 PyTorch reference of tests/ref/model_ref.py.
# needs: venv models
load helpers

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    export G="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama "$TINY"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$TINY"
    printf '%s\n' '{"id":"p1","messages":[{"role":"user","content":"add 2 and 3"}],"x":1e400}' \
        '{"id":"p2","messages":[{"role":"user","content":"hello"}]}' \
        '{"id":"p3","prompt_tokens":[1,4,5,6,7,2,4,1]}' \
        '{"id":"p4","messages":[{"role":"system","content":"s"},{"role":"user","content":"xyz"}]}' > "$BATS_FILE_TMPDIR/prompts.jsonl"
}

needs_tiny() { [ -d "$TINY" ] || skip "no test venv (make venv)"; }

P() { echo "$BATS_FILE_TMPDIR/prompts.jsonl"; }

@test "--help: a flag named only -k shows once; --batch says less than k is raised to k (as it runs)" {
    run grpo-rollout --help
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | grep -Eq '^  -k N  +completions per prompt'
    printf '%s\n' "$output" | grep -Eq '^  --batch N  +.*less than k is raised to k'
    local t
    for t in grpo-prep grpo-rollout grpo-reward grpo-advantage grpo-update grpo-export; do
        run "$t" --help
        ! printf '%s\n' "$output" | grep -Eq '^  (-[a-zA-Z]+), \1( |$)' || { echo "$t: a name shown twice"; false; }
        # short aliases still show beside their long name
        [ "$t" != grpo-prep ] || printf '%s\n' "$output" | grep -Eq '^  -i, --in F '
    done
}

@test "empty input: no record, exit 0, and \"grpo-rollout: 0 prompts\" on stderr" {
    needs_tiny
    : > none.jsonl
    run --separate-stderr grpo-rollout --model "$TINY" --in none.jsonl --out out.jsonl
    [ "$status" -eq 0 ]
    [ ! -s out.jsonl ]
    [ "$stderr" = "grpo-rollout: 0 prompts" ]
}

@test "K records per prompt, together, in sample order, with every rollout field" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 3 --max-new-tokens 12 --in "$(P)" --out r.jsonl
    [ "$(wc -l < r.jsonl)" -eq 12 ]
    [ "$(jq -r '"\(.id)/\(.sample)"' r.jsonl | tr '\n' ' ')" = "p1/0 p1/1 p1/2 p2/0 p2/1 p2/2 p3/0 p3/1 p3/2 p4/0 p4/1 p4/2 " ]
    # types of every field, and logprobs one per completion token
    jq -e '(.prompt_tokens|type)=="array" and (.completion_tokens|type)=="array" and (.completion|type)=="string"
           and (.logprobs|length)==(.completion_tokens|length) and (.temperature==1)
           and (.finish_reason=="stop" or .finish_reason=="length") and .policy=="tiny"
           and all(.logprobs[]; . <= 0)' r.jsonl > /dev/null
    # prompt fields come first, untouched
    head -n 1 r.jsonl | grep -q '^{"id":"p1","messages":\[{"role":"user","content":"add 2 and 3"}\],"x":1e400,"sample":0,'
    # a record's own prompt_tokens are used and not written twice
    [ "$(grep -c '"prompt_tokens"' <(sed -n 7p r.jsonl))" -eq 1 ]
    [ "$(sed -n 7p r.jsonl | jq -c .prompt_tokens)" = "[1,4,5,6,7,2,4,1]" ]
}

@test "log-probabilities equal the float64 reference under the sampling temperature" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 16 --temperature 0.7 --in "$(P)" --out r.jsonl
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_rollout.py" "$TINY" r.jsonl 1e-4
    echo "$output" | grep -v '^ok' || true
    [ "$status" -eq 0 ]
    jq -e '.temperature == 0.7' r.jsonl > /dev/null
}

@test "--temperature 0 is greedy: the reference's argmax at every step" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 16 --temperature 0 --in "$(P)" --out g.jsonl
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_rollout.py" "$TINY" g.jsonl 1e-4
    [ "$status" -eq 0 ]
    # both samples of a prompt are the same when greedy
    [ "$(jq -c 'select(.id=="p1") | .completion_tokens' g.jsonl | sort -u | wc -l)" -eq 1 ]
}

@test "same seed, same bytes; another seed, other tokens; --seed keys by (seed, id, sample)" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 3 --max-new-tokens 12 --seed 5 --in "$(P)" --out a.jsonl
    grpo-rollout --model "$TINY" -k 3 --max-new-tokens 12 --seed 5 --in "$(P)" --out b.jsonl
    cmp a.jsonl b.jsonl
    grpo-rollout --model "$TINY" -k 3 --max-new-tokens 12 --seed 6 --in "$(P)" --out c.jsonl
    ! cmp -s a.jsonl c.jsonl || false
    # a prompt's samples do not depend on the other prompts in the file
    sed -n 2p "$(P)" > one.jsonl
    grpo-rollout --model "$TINY" -k 3 --max-new-tokens 12 --seed 5 --in one.jsonl --out d.jsonl
    [ "$(jq -c .completion_tokens d.jsonl)" = "$(jq -c 'select(.id=="p2") | .completion_tokens' a.jsonl)" ]
}

@test "--batch and --threads do not change which tokens a sample gets" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 4 --max-new-tokens 12 --batch 1 --threads 1 --in "$(P)" --out a.jsonl
    grpo-rollout --model "$TINY" -k 4 --max-new-tokens 12 --batch 64 --threads 2 --in "$(P)" --out b.jsonl
    diff <(jq -c '[.id, .sample, .completion_tokens]' a.jsonl) <(jq -c '[.id, .sample, .completion_tokens]' b.jsonl)
    # logprobs agree to float rounding of the batched products
    paste <(jq -c .logprobs a.jsonl) <(jq -c .logprobs b.jsonl) | jq -R -e 'split("\t") | map(fromjson) | transpose | all(.[]; (.[0] - .[1]) | fabs < 1e-5)' > /dev/null
}

@test "--shard i/n: the shards together are the whole" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 8 --in "$(P)" --out all.jsonl
    for i in 0 1 2; do grpo-rollout --model "$TINY" -k 2 --max-new-tokens 8 --shard $i/3 --in "$(P)" --out s$i.jsonl; done
    # the same samples; logprobs may differ in the last float digit, since a
    # shard batches other prompts together (float summation order)
    diff <(jq -c '[.id, .sample, .completion_tokens, .finish_reason]' all.jsonl | sort) \
         <(cat s0.jsonl s1.jsonl s2.jsonl | jq -c '[.id, .sample, .completion_tokens, .finish_reason]' | sort)
    [ "$(cat s0.jsonl s1.jsonl s2.jsonl | wc -l)" -eq 8 ]
}

@test "--max-new-tokens caps completions; eos ends them with stop and is kept" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 8 --max-new-tokens 5 --in "$(P)" --out r.jsonl
    jq -e '(.completion_tokens|length) <= 5' r.jsonl > /dev/null
    jq -s -e 'map(select(.finish_reason=="length")) | all((.completion_tokens|length) == 5 and .completion_tokens[-1] != 2)' r.jsonl > /dev/null
    jq -s -e 'map(select(.finish_reason=="stop")) | all(.completion_tokens[-1] == 2)' r.jsonl > /dev/null
    # with many samples, some hit eos (id 2, probability ~1/97 per token) within 60 tokens
    grpo-rollout --model "$TINY" -k 16 --max-new-tokens 60 --in "$(P)" --out long.jsonl
    [ "$(jq -r 'select(.finish_reason=="stop") | .completion_tokens[-1]' long.jsonl | sort -u)" = 2 ]
}

@test "--stop ends a completion at a string, which is cut from the text" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 8 --max-new-tokens 40 --in "$(P)" --out plain.jsonl
    # pick a character that occurs in some completion, then stop on it
    s=$(jq -r 'select(.finish_reason=="length") | .completion' plain.jsonl | head -n 1 | cut -c 3)
    grpo-rollout --model "$TINY" -k 8 --max-new-tokens 40 --stop "$s" --stop "never-there" --in "$(P)" --out s.jsonl
    first=$(jq -r 'select(.finish_reason=="length") | .completion' plain.jsonl | head -n 1 | cut -c 1-2)
    jq -e --arg s "$s" '.completion | contains($s) | not' s.jsonl > /dev/null
    [ "$(jq -r 'select(.finish_reason=="stop") | .id' s.jsonl | wc -l)" -gt 0 ]
}

@test "sampling filters: --top-k 1 is greedy, --top-p and --min-p keep the reference logprob" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 10 --top-k 1 --in "$(P)" --out k1.jsonl
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 10 --temperature 0 --in "$(P)" --out g.jsonl
    diff <(jq -c .completion_tokens k1.jsonl) <(jq -c .completion_tokens g.jsonl)
    grpo-rollout --model "$TINY" -k 2 --max-new-tokens 10 --top-p 0.5 --min-p 0.1 --in "$(P)" --out f.jsonl
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_rollout.py" "$TINY" f.jsonl 1e-4
    [ "$status" -eq 0 ]
}

@test "--chat-template and --policy" {
    needs_tiny
    grpo-rollout --model "$TINY" -k 1 --max-new-tokens 2 --chat-template raw --policy step-7 --in "$(P)" --out r.jsonl
    # raw: the text alone, no <|im_start|> (id 1)
    [ "$(head -n 1 r.jsonl | jq -c '.prompt_tokens | index(1)')" = null ]
    jq -e '.policy == "step-7"' r.jsonl > /dev/null
}

@test "bad prompts and flags: exit codes and one-line errors" {
    needs_tiny
    run -64 grpo-rollout --in "$(P)"
    assert_one_line_error grpo-rollout "--model is required"
    run -66 grpo-rollout --model nowhere --in "$(P)"
    assert_one_line_error grpo-rollout "nowhere"
    run -64 grpo-rollout --model "$TINY" --device tpu --in "$(P)"
    assert_one_line_error grpo-rollout "--device"
    printf '{"id":"a","prompt_tokens":[1,2]}\n{"id":"b","prompt_tokens":[1,500]}\n' > bad.jsonl
    run -65 grpo-rollout --model "$TINY" --in bad.jsonl --out o.jsonl
    assert_one_line_error grpo-rollout "bad.jsonl:2: field \"prompt_tokens\": element 1: expected a token id in \[0, 97\)"
    [ ! -e o.jsonl ]
    printf '{"prompt_tokens":[1,2]}\n' > noid.jsonl
    run -65 grpo-rollout --model "$TINY" --in noid.jsonl
    assert_one_line_error grpo-rollout "noid.jsonl:1: field \"id\""
    printf '{"id":"e","prompt_tokens":[]}\n' > empty.jsonl
    run -65 grpo-rollout --model "$TINY" --in empty.jsonl
    assert_one_line_error grpo-rollout "the prompt has no tokens"
    run -64 grpo-rollout --model "$TINY" -k 0
    assert_one_line_error grpo-rollout "-k: 0 is out of range"
}

@test "SmolLM2 GGUF: samples with log-probabilities of the reference forward" {
    needs_tiny
    [ -f "$G" ] || skip "no model (make models)"
    printf '{"id":"q","messages":[{"role":"user","content":"What is 2+3?"}]}\n' > q.jsonl
    grpo-rollout --model "$G" -k 2 --max-new-tokens 6 --temperature 0.8 --in q.jsonl --out r.jsonl
    [ "$(wc -l < r.jsonl)" -eq 2 ]
    # 30 fp32 layers against float64 on the same dequantized weights
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_rollout.py" "$G" r.jsonl 2e-3
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "continuous batching: a longer prompt admitted mid-flight grows the cache, others unchanged" {
    needs_tiny
    cp "$(P)" grow.jsonl
    long=$(printf 'w%.0s' $(seq 1 70))
    printf '{"id":"p5","messages":[{"role":"user","content":"%s"}]}\n' "$long" >> grow.jsonl
    # --batch 4 = one prompt at a time; --batch 16 keeps four prompts in flight
    grpo-rollout --model "$TINY" -k 4 --max-new-tokens 30 --batch 4 --in grow.jsonl --out one.jsonl
    grpo-rollout --model "$TINY" -k 4 --max-new-tokens 30 --batch 16 --progress --in grow.jsonl --out many.jsonl 2> err.txt
    diff <(jq -c '[.id, .sample, .completion_tokens]' one.jsonl) <(jq -c '[.id, .sample, .completion_tokens]' many.jsonl)
    [ "$(jq -r .id many.jsonl | uniq | tr '\n' ' ')" = "p1 p2 p3 p4 p5 " ]
    grep -q 'tokens/s); KV cache .* MiB (f32, 16 sequences x [0-9]* positions)' err.txt
}

@test "OpenBLAS runs kernels for this CPU, not its SSE3 fallback" {
    needs_tiny
    grep -qw avx2 /proc/cpuinfo || skip "no AVX2 on this CPU"
    grpo-rollout --model "$TINY" -k 1 --max-new-tokens 1 --progress --in "$(P)" > /dev/null 2> err.txt
    grep -q 'BLAS kernels ' err.txt
    ! grep -qiE 'BLAS kernels (Prescott|Core2|Unknown)' err.txt || false
    # an explicit choice is respected
    OPENBLAS_CORETYPE=Haswell grpo-rollout --model "$TINY" -k 1 --max-new-tokens 1 --progress --in "$(P)" > /dev/null 2> err2.txt
    grep -q 'BLAS kernels Haswell' err2.txt
}

@test "--skip-bad skips prompts that cannot be generated and counts them" {
    needs_tiny
    printf '{"id":"a","prompt_tokens":[1,2]}\n{"id":"b","prompt_tokens":[1,500]}\n{"prompt_tokens":[1]}\n{"id":"c","prompt_tokens":[3,4]}\n' > mixed.jsonl
    run --separate-stderr grpo-rollout --model "$TINY" -k 2 --max-new-tokens 3 --skip-bad --in mixed.jsonl --out o.jsonl
    [ "$status" -eq 0 ]
    [ "$(jq -r .id o.jsonl | uniq | tr '\n' ' ')" = "a c " ]
    [[ "$stderr" == *"skipped 2 bad records (--skip-bad); the first: "*"mixed.jsonl:2:"* ]]
}

@test "SmolLM2 greedy answers a factual question and a one-digit sum" {
    needs_tiny
    [ -f "$G" ] || skip "no model (make models)"
    printf '%s\n' '{"id":"fr","messages":[{"role":"user","content":"What is the capital of France?"}]}' \
        '{"id":"sum","messages":[{"role":"user","content":"What is 2+3?"}]}' > q.jsonl
    grpo-rollout --model "$G" -k 1 --temperature 0 --max-new-tokens 24 --in q.jsonl --out a.jsonl
    jq -r 'select(.id=="fr") | .completion' a.jsonl | grep -q Paris
    jq -r 'select(.id=="sum") | .completion' a.jsonl | grep -q 5
    jq -e 'select(.id=="sum") | .finish_reason == "stop" and .completion_tokens[-1] == 2' a.jsonl > /dev/null
}

@test "prompts that finish behind a slow one wait in order, however many" {
    needs_tiny
    # p0 runs 40 tokens; each long prompt fills the 128-token context and ends
    # after one token, so all of them finish while p0 is still going
    printf '{"id":"p0","prompt_tokens":[1,4,5]}\n' > pile.jsonl
    long=$(seq 3 129 | head -n 127 | tr '\n' ',' | sed 's/,$//' | sed 's/[0-9]*/5/g')
    for i in $(seq 1 30); do printf '{"id":"q%d","prompt_tokens":[%s]}\n' "$i" "$long"; done >> pile.jsonl
    grpo-rollout --model "$TINY" -k 1 --batch 2 --max-new-tokens 40 --stop never-there --in pile.jsonl --out o.jsonl
    [ "$(wc -l < o.jsonl)" -eq 31 ]
    [ "$(jq -r .id o.jsonl | head -n 3 | tr '\n' ' ')" = "p0 q1 q2 " ]
    [ "$(jq -r .id o.jsonl | tail -n 1)" = q30 ]
    jq -e 'select(.id != "p0") | .finish_reason == "length" and (.completion_tokens | length) == 1' o.jsonl > /dev/null
}

@test "packed weights (AVX-512, or AVX2 with FMA): --batch, --threads and --shard change no byte of the records, truncated sampling too" {
    smol="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    [ -f "$smol" ] || skip "no model (make models)"
    grep -qw avx512f /proc/cpuinfo || { grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; } ||
        skip "neither AVX-512 nor AVX2 with FMA: weights stay row-major and OpenBLAS's sums depend on the batch"
    grpo-prep --task arith --n 3 --seed 3 --model "$smol" --out p.jsonl
    args=(--model "$smol" --in p.jsonl -k 3 --max-new-tokens 12 --temperature 1 --seed 5)
    grpo-rollout "${args[@]}" --batch 3 --threads 1 --out a.jsonl
    grpo-rollout "${args[@]}" --batch 9 --threads 2 --out b.jsonl
    cmp a.jsonl b.jsonl
    # a step's rows are sampled on several threads, each with its own scratch: truncated sampling too
    grpo-rollout "${args[@]}" --top-k 40 --top-p 0.9 --min-p 0.02 --batch 3 --threads 1 --out ta.jsonl
    grpo-rollout "${args[@]}" --top-k 40 --top-p 0.9 --min-p 0.02 --batch 9 --threads 2 --out tb.jsonl
    cmp ta.jsonl tb.jsonl
    ! cmp -s a.jsonl ta.jsonl || false
    # each output column comes from one thread and one kernel call whatever the rows
    # batched with it, so a shard's records are the whole run's, byte for byte
    grpo-rollout "${args[@]}" --shard 1/2 --out s1.jsonl
    [ -s s1.jsonl ]
    cmp s1.jsonl <(grep -F -f <(jq -r .id s1.jsonl | sort -u) a.jsonl)
}

@test "OpenMP's threads spin briefly, then sleep, unless OMP_WAIT_POLICY or GOMP_SPINCOUNT says otherwise" {
    needs_tiny
    local f=(--model "$TINY" --in "$(P)" -k 2 --max-new-tokens 4 --seed 1 --progress)
    run --separate-stderr env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT grpo-rollout "${f[@]}" --out a.jsonl
    [ "$status" -eq 0 ]
    printf '%s\n' "$stderr" | grep -Eq '; OpenMP spin [0-9]+; '
    run --separate-stderr env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=passive grpo-rollout "${f[@]}" --out b.jsonl
    [ "$status" -eq 0 ]
    printf '%s\n' "$stderr" | grep -q '; OpenMP spin passive; '
    run --separate-stderr env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=500 grpo-rollout "${f[@]}" --out c.jsonl
    [ "$status" -eq 0 ]
    printf '%s\n' "$stderr" | grep -q '; OpenMP spin 500; '
    # how threads wait changes no token
    cmp a.jsonl b.jsonl
    cmp a.jsonl c.jsonl
}

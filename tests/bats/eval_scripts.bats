#!/usr/bin/env bats
# The scripts of scripts/: grpo-eval on a tiny random llama (its eval line
# recomputed from --samples by Python, determinism, reward flags, errors), the
# pass@k estimator against Python's math.comb, grpo-summary and grpo-compare
# on fixed metrics files (exact output), grpo-plot's PNG, grpo-samples.
load helpers

S="$GRPO_ROOT/scripts"
FIX="$GRPO_ROOT/tests/fixtures/metrics"

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama "$TINY"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$TINY"
    # held-out arithmetic, without the system message (the tiny model's context is 128)
    grpo-prep --task arith --n 6 --split test --seed 1 --format plain --model "$TINY" \
        --out "$BATS_FILE_TMPDIR/arith.jsonl"
    # one-digit answers: a random model's last digit is right about one time in ten,
    # so correct and wrong samples mix (c strictly between 0 and n for some prompts)
    for i in $(seq 0 19); do echo "{\"id\":\"d$i\",\"prompt\":\"n$i\",\"answer\":\"$((i % 10))\"}"; done |
        grpo-prep --task jsonl --format plain --model "$TINY" --out "$BATS_FILE_TMPDIR/digits.jsonl"
}

needs_tiny() { [ -d "$TINY" ] || skip "no test venv (make venv)"; }
ARITH() { echo "$BATS_FILE_TMPDIR/arith.jsonl"; }
DIGITS() { echo "$BATS_FILE_TMPDIR/digits.jsonl"; }

# recompute EVAL_LINE SAMPLES: checks every field of the eval line against the
# scored samples, computed independently in Python (math.comb for pass@k).
recompute() {
    "$PY" - "$1" "$2" <<'PY'
import json, math, sys
line = json.load(open(sys.argv[1]))
recs = [json.loads(l) for l in open(sys.argv[2])]
ids = {r["id"] for r in recs}
# samples without a reference (rewards.answer null) are out of accuracy and pass@k
groups = {}
for r in recs:
    if r["rewards"]["answer"] is not None:
        groups.setdefault(r["id"], []).append(r["rewards"]["answer"])
acc = [r["rewards"]["answer"] for r in recs if r["rewards"]["answer"] is not None]
rew = [r["reward"] for r in recs if r["reward"] is not None]
mean = lambda xs: sum(xs) / len(xs) if xs else None
want = {
    "eval/accuracy": mean(acc),
    "eval/reward": mean(rew),
    "eval/completion_length": sum(len(r["completion_tokens"]) for r in recs) / len(recs),
    "eval/clipped_ratio": sum(r["finish_reason"] == "length" for r in recs) / len(recs),
    "eval/prompts": len(ids),
}
for key in line:
    if key.startswith("eval/pass@"):
        j = int(key[len("eval/pass@"):])
        est = []
        for g in groups.values():
            n, c = len(g), sum(1 for a in g if a == 1)
            est.append(1.0 if n - c < j else 1 - math.comb(n - c, j) / math.comb(n, j))
        want[key] = mean(est)
for key, v in want.items():
    if v is None:
        assert line[key] is None, (key, line[key])
    else:
        assert abs(line[key] - v) <= 1e-12 * max(1, abs(v)), (key, line[key], v)
k = line["eval/k"]
assert all(len(g) == k for g in groups.values()), "every prompt has k samples"
assert len(recs) == k * len(ids)
PY
}

@test "grpo-eval greedy (k = 1): one line, its fields in order, values recomputed from --samples" {
    needs_tiny
    run "$S/grpo-eval" --model "$TINY" --in "$(ARITH)" --out e.json --step 0 --samples s.jsonl
    [ "$status" -eq 0 ]
    [ "$(wc -l < e.json)" -eq 1 ]
    [ "$(jq -c 'keys_unsorted' e.json)" = '["kind","step","eval/accuracy","eval/pass@1","eval/reward","eval/completion_length","eval/clipped_ratio","eval/prompts","eval/k","eval/temperature","eval/seconds"]' ]
    jq -e '.kind == "eval" and .step == 0 and .["eval/k"] == 1 and .["eval/temperature"] == 0
           and .["eval/prompts"] == 6 and (.["eval/seconds"] | type == "number" and . >= 0)' e.json
    # greedy: the rollout ran at temperature 0; the defaults: --fn answer, 128 new tokens at most
    [ "$(jq -r .temperature s.jsonl | sort -u)" = 0 ]
    [ "$(jq -c .rewards s.jsonl | jq -r 'keys_unsorted | join(",")' | sort -u)" = answer ]
    [ "$(jq '.completion_tokens | length' s.jsonl | sort -n | tail -n 1)" -le 128 ]
    # the sample records are whole rollout records, scored
    jq -e 'has("prompt_tokens") and has("logprobs") and has("policy") and has("reward")' s.jsonl > /dev/null
    recompute e.json s.jsonl
    no_temp_left .
}

@test "grpo-eval with k samples: pass@j by the unbiased estimator equals Python's math.comb on the samples" {
    needs_tiny
    "$S/grpo-eval" --model "$TINY" --in "$(DIGITS)" --out e.json --step 7 --k 8 --max-new-tokens 6 \
        --pass-at 4,1,2,8 --samples s.jsonl --seed 5
    [ "$(jq -c '[keys_unsorted[] | select(startswith("eval/pass@"))]' e.json)" = '["eval/pass@1","eval/pass@2","eval/pass@4","eval/pass@8"]' ]
    jq -e '.step == 7 and .["eval/k"] == 8 and .["eval/temperature"] == 1 and .["eval/prompts"] == 20' e.json
    # the samples mix right and wrong, within a prompt too, so the estimator is exercised
    jq -e '.["eval/accuracy"] > 0 and .["eval/accuracy"] < 1' e.json
    jq -s -e 'group_by(.id) | map(map(.rewards.answer) | add) | any(. > 0 and . < 8)' s.jsonl
    jq -e '.["eval/pass@1"] < .["eval/pass@2"] and .["eval/pass@2"] < .["eval/pass@4"] and .["eval/pass@4"] < .["eval/pass@8"]' e.json
    recompute e.json s.jsonl
    [ "$(jq -r .temperature s.jsonl | sort -u)" = 1 ]
    [ "$(jq '.completion_tokens | length' s.jsonl | sort -n | tail -n 1)" -le 6 ]
    # default --pass-at with k = 8: 1 and 8
    "$S/grpo-eval" --model "$TINY" --in "$(DIGITS)" --out d.json --step 7 --k 8 --max-new-tokens 6 --seed 5
    [ "$(jq -c '[keys_unsorted[] | select(startswith("eval/pass@"))]' d.json)" = '["eval/pass@1","eval/pass@8"]' ]
    [ "$(jq -c 'del(.["eval/seconds"], .["eval/pass@2"], .["eval/pass@4"])' e.json)" = "$(jq -c 'del(.["eval/seconds"])' d.json)" ]
}

@test "grpo-eval is deterministic: the same seed gives the same line but for seconds; another seed other samples" {
    needs_tiny
    for i in 1 2; do
        "$S/grpo-eval" --model "$TINY" --in "$(DIGITS)" --out "e$i.json" --step 1 --k 4 --max-new-tokens 6 \
            --seed 3 --samples "s$i.jsonl" --threads 1
    done
    [ "$(jq -c 'del(.["eval/seconds"])' e1.json)" = "$(jq -c 'del(.["eval/seconds"])' e2.json)" ]
    cmp s1.jsonl s2.jsonl
    "$S/grpo-eval" --model "$TINY" --in "$(DIGITS)" --out e3.json --step 1 --k 4 --max-new-tokens 6 \
        --seed 4 --samples s3.jsonl --threads 1
    ! cmp -s s1.jsonl s3.jsonl || false
}

@test "grpo-eval --reward: answer is added at weight 0 when the flags leave it out; a weight of answer counts" {
    needs_tiny
    "$S/grpo-eval" --model "$TINY" --in "$(DIGITS)" --out e.json --step 2 --k 2 --max-new-tokens 6 \
        --reward "--fn 'length' --max-len 4 --overlong-buffer 2" --samples s.jsonl
    [ "$(jq -c '.rewards | keys_unsorted' s.jsonl | sort -u)" = '["length","answer"]' ]
    # the reward is the length penalty alone; accuracy still comes from answer
    jq -e -s 'all(.reward == .rewards.length) and any(.reward < 0) and any(.rewards.answer == 1)' s.jsonl
    recompute e.json s.jsonl
    "$S/grpo-eval" --model "$TINY" --in "$(DIGITS)" --out w.json --step 2 --k 2 --max-new-tokens 6 \
        --reward '--fn=answer:2' --samples w.jsonl
    [ "$(jq -c '.rewards | keys_unsorted' w.jsonl | sort -u)" = '["answer"]' ]
    jq -e '.["eval/reward"] == 2 * .["eval/accuracy"] and .["eval/accuracy"] > 0' w.json
}

@test "grpo-eval --correct env: a multi-turn environment's success is the accuracy; env added at weight 0, or weighted when named" {
    needs_tiny
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_env_prefix.py" make chatml chatml
    # the environment ends every episode at once: odd samples succeed, even ones fail
    printf '%s\n' 'import json, sys' 'for line in sys.stdin:' '    q = json.loads(line)' \
        '    print(json.dumps({"id": q["id"], "sample": q["sample"], "turn": q["turn"], "done": True, "reward": q["sample"] % 2}), flush=True)' \
        > odd.py
    for i in 0 1 2; do echo "{\"id\":\"g$i\",\"messages\":[{\"role\":\"user\",\"content\":\"Guess $i\"}]}"; done > g.jsonl
    "$S/grpo-eval" --model chatml --in g.jsonl --out e.json --step 1 --k 4 --max-new-tokens 3 --correct env \
        --reward '--fn format' --rollout "--env '$GRPO_PY -u odd.py'" --samples s.jsonl
    [ "$(jq -c '.rewards | keys_unsorted' s.jsonl | sort -u)" = '["format","env"]' ]
    jq -e -s 'length == 12 and ([.[].rewards.env] == [0,1,0,1,0,1,0,1,0,1,0,1]) and all(.reward == .rewards.format)' s.jsonl
    # half the samples of every prompt succeed: accuracy 1/2, pass@4 1
    jq -e '.["eval/accuracy"] == 0.5 and .["eval/pass@1"] == 0.5 and .["eval/pass@4"] == 1 and .["eval/prompts"] == 3' e.json
    # named in --reward, its weight counts in the reward
    "$S/grpo-eval" --model chatml --in g.jsonl --out w.json --step 1 --k 4 --max-new-tokens 3 --correct env \
        --reward '--fn env:2' --rollout "--env '$GRPO_PY -u odd.py'"
    jq -e '.["eval/accuracy"] == 0.5 and .["eval/reward"] == 1' w.json
    # without --correct, accuracy is answer's, and these prompts have no answer
    "$S/grpo-eval" --model chatml --in g.jsonl --out a.json --step 1 --k 4 --max-new-tokens 3 \
        --reward '--fn env' --rollout "--env '$GRPO_PY -u odd.py'"
    jq -e '.["eval/accuracy"] == null and .["eval/reward"] == 0.5' a.json
    no_temp_left .
}

@test "grpo-eval: prompts without a reference are left out of accuracy and pass@k; none at all gives null" {
    needs_tiny
    for i in 0 1 2; do echo "{\"id\":\"q$i\",\"prompt\":\"n$i\"}"; done |
        grpo-prep --task jsonl --format plain --model "$TINY" --out free.jsonl
    "$S/grpo-eval" --model "$TINY" --in free.jsonl --out n.json --step 0 --k 2 --max-new-tokens 4 --samples n.jsonl
    jq -e '.["eval/accuracy"] == null and .["eval/pass@1"] == null and .["eval/pass@2"] == null
           and .["eval/reward"] == null and .["eval/prompts"] == 3 and .["eval/completion_length"] > 0' n.json
    recompute n.json n.jsonl
    # mixed: 20 prompts with answers, 3 without
    cat "$(DIGITS)" free.jsonl > mixed.jsonl
    "$S/grpo-eval" --model "$TINY" --in mixed.jsonl --out m.json --step 0 --k 4 --max-new-tokens 6 --samples m.jsonl
    jq -e '.["eval/prompts"] == 23 and .["eval/accuracy"] > 0' m.json
    [ "$(jq -s '[.[] | select(.rewards.answer == null)] | length' m.jsonl)" -eq 12 ]
    recompute m.json m.jsonl
}

@test "grpo-eval: --out - prints the line; --samples F.zst is compressed; --rollout flags reach grpo-rollout" {
    needs_tiny
    run --separate-stderr "$S/grpo-eval" --model "$TINY" --in "$(ARITH)" --out - --step 3 --samples s.jsonl.zst
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | wc -l)" -eq 1 ]
    printf '%s\n' "$output" | jq -e '.kind == "eval" and .step == 3' > /dev/null
    zstd -t -q s.jsonl.zst
    [ "$(zstd -dc s.jsonl.zst | wc -l)" -eq 6 ]
    "$S/grpo-eval" --model "$TINY" --in "$(ARITH)" --out e.json --step 3 --samples p.jsonl
    zstd -dc s.jsonl.zst | cmp - p.jsonl
    # a stop string cuts every completion short
    "$S/grpo-eval" --model "$TINY" --in "$(ARITH)" --out e.json --step 3 --k 4 --rollout "--stop 'a' --batch 8" \
        --samples st.jsonl --max-new-tokens 20
    jq -e -s 'all(.completion | contains("a") | not) and any(.finish_reason == "stop")' st.jsonl
    no_temp_left .
}

@test "grpo-eval usage errors: 64 with one line, nothing written" {
    run "$S/grpo-eval" --in p --out o --step 0
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--model is required"
    run "$S/grpo-eval" --model m --out o --step 0
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--in is required"
    run "$S/grpo-eval" --model m --in p --step 0
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--out is required"
    run "$S/grpo-eval" --model m --in p --out o
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--step is required"
    run "$S/grpo-eval" --model m --in p --out o --step x
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--step must be an integer"
    run "$S/grpo-eval" --model m --in p --out o --step 0 --k 0
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--k must be an integer >= 1"
    run "$S/grpo-eval" --model m --in p --out o --step 0 --temperature -1
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--temperature"
    run "$S/grpo-eval" --model m --in p --out o --step 0 --k 8 --pass-at 1,9
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--pass-at: .*1\.\.8"
    run "$S/grpo-eval" --model m --in p --out o --step 0 --reward '--fn answer --out x'
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--reward: grpo-eval sets --out"
    run "$S/grpo-eval" --model m --in p --out o --step 0 --rollout '-k 3'
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--rollout: grpo-eval sets -k"
    run "$S/grpo-eval" --model m --in p --out o --step 0 --reward "--fn 'answer"
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "unbalanced quotes"
    run "$S/grpo-eval" --model m --in p --out o --step 0 --correct 'answer:1'
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--correct must be a reward function's name, got 'answer:1'"
    run "$S/grpo-eval" --model m --in p --out o --step 0 --bogus
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "unknown argument '--bogus'"
    run "$S/grpo-eval" --model m --in p --out o --step
    [ "$status" -eq 64 ]; assert_one_line_error grpo-eval "--step needs a value"
    [ ! -e o ]
    run "$S/grpo-eval" --help
    [ "$status" -eq 0 ]
    for f in --model --in --out --step --k --temperature --max-new-tokens --reward --rollout --pass-at --correct \
        --samples --seed --threads; do
        printf '%s\n' "$output" | grep -q -- "  $f " || { echo "missing $f"; false; }
    done
}

@test "grpo-eval: a missing input is 66; a tool's failure is its status, and nothing is written" {
    needs_tiny
    run "$S/grpo-eval" --model "$TINY" --in nope.jsonl --out o --step 0
    [ "$status" -eq 66 ]; assert_one_line_error grpo-eval "nope.jsonl"
    run "$S/grpo-eval" --model nope --in "$(ARITH)" --out o --step 0
    [ "$status" -eq 66 ]; assert_one_line_error grpo-eval "nope"
    echo '{"messages":[{"role":"user","content":"hi"}]}' > bad.jsonl
    run "$S/grpo-eval" --model "$TINY" --in bad.jsonl --out o --step 0 --samples s.jsonl
    [ "$status" -eq 65 ]; assert_one_line_error grpo-rollout "bad.jsonl:1"
    [ ! -e o ]
    [ ! -e s.jsonl ]
    no_temp_left .
}

@test "pass@k in jq equals 1 - C(n-c,k)/C(n,k) (exact rationals in Python) on many n, c, k" {
    "$PY" - > cases.jsonl <<'PY'
import json, random
random.seed(7)
cases = [(n, c, k) for n in range(1, 26) for c in range(0, n + 1) for k in range(1, n + 3)]
for n in (50, 100, 200, 500, 1000, 5000):
    for _ in range(40):
        c = random.randint(0, n)
        cases.append((n, c, random.randint(1, n)))
    cases += [(n, 0, n), (n, n, 1), (n, 1, 1), (n, n - 1, 2), (n, 1, n), (n, n // 2, n // 2 + 1)]
for n, c, k in cases:
    print(json.dumps([n, c, k]))
PY
    jq -c -L "$S/lib" 'include "passk"; . + [pass_at_k(.[0]; .[1]; .[2])]' cases.jsonl > got.jsonl
    "$PY" - got.jsonl <<'PY'
import json, math, sys
from fractions import Fraction
checked = 0
for line in open(sys.argv[1]):
    n, c, k, got = json.loads(line)
    if k > n:
        assert got is None, (n, c, k, got)
        continue
    want = float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))
    assert abs(got - want) <= 1e-12, (n, c, k, got, want)
    if c == 0: assert got == 0, (n, c, k, got)
    if n - c < k: assert got == 1, (n, c, k, got)
    checked += 1
assert checked > 5000, checked
PY
    # bad arguments are errors, not numbers
    run jq -n -L "$S/lib" 'include "passk"; pass_at_k(3; 4; 1)'
    [ "$status" -ne 0 ]; [[ $output == *"0 <= c <= n"* ]]
    run jq -n -L "$S/lib" 'include "passk"; pass_at_k(3; 1; 0)'
    [ "$status" -ne 0 ]
    run jq -n -L "$S/lib" 'include "passk"; pass_at_k(3; 1.5; 1)'
    [ "$status" -ne 0 ]; [[ $output == *"integers"* ]]
}

@test "grpo-summary on fixed metrics: the exact table (a step written twice counts once, as its last line)" {
    run "$S/grpo-summary" "$FIX/a.jsonl"
    [ "$status" -eq 0 ]
    diff <(printf '%s\n' "$output") - <<EOF
run       $FIX/a.jsonl
steps     6 updates (steps 1-6), 3 evals (steps 0-6)
seconds   31.000 (updates 24.500, evals 6.500)
tokens/s  444.9 (10900 tokens)

metric                        first      last      best      step      mean
reward                       0.1250    0.6250    0.7500         5    0.4375
kl                           0.0000    0.0500         -         -    0.0263
entropy                      1.9000    1.9000         -         -    1.9000
completions/mean_length     40.0000   29.0000         -         -   34.7083
eval/accuracy                0.1000    0.3500    0.3500         6    0.2167
eval/pass@1                  0.1000    0.3500    0.3500         6    0.2167
eval/reward                  0.1000    0.3500    0.3500         6    0.2167
eval/completion_length      30.5000   25.2500         -         -   27.9167
EOF
}

@test "grpo-summary: batch accuracy and pass@k rows, no KL row with beta 0; two runs; a run directory; zstd" {
    mkdir run && cp "$FIX/b.jsonl" run/metrics.jsonl
    run "$S/grpo-summary" run
    [ "$status" -eq 0 ]
    diff <(printf '%s\n' "$output") - <<'EOF'
run       run/metrics.jsonl
steps     4 updates (steps 1-4), 2 evals (steps 0-4)
seconds   31.000 (updates 20.000, evals 11.000)
tokens/s  390.0 (7800 tokens)

metric                        first      last      best      step      mean
reward                       0.2000    0.5000    0.5000         4    0.3625
rewards/answer/mean          0.1500    0.3750    0.3750         4    0.2813
rewards/format/mean          0.2500    0.6250    0.6250         4    0.4063
entropy                      1.9000    1.9000         -         -    1.9000
completions/mean_length     41.0000   33.0000         -         -   37.5000
eval/accuracy                0.1000    0.3000    0.3000         4    0.2000
eval/pass@1                  0.1000    0.3000    0.3000         4    0.2000
eval/pass@4                  0.2500    0.5500    0.5500         4    0.4000
eval/reward                  0.1500    0.4000    0.4000         4    0.2750
eval/completion_length      31.0000   27.5000         -         -   29.2500
EOF
    # two runs: both tables, a blank line between; a compressed file reads the same
    zstd -q "$FIX/a.jsonl" -o a.jsonl.zst
    "$S/grpo-summary" a.jsonl.zst run > two.txt
    diff <(sed -n '1,14p' two.txt | tail -n +2) <("$S/grpo-summary" "$FIX/a.jsonl" | tail -n +2)
    [ "$(sed -n 15p two.txt)" = "" ]
    [ "$(sed -n 16p two.txt)" = "run       run/metrics.jsonl" ]
    [ "$(wc -l < two.txt)" -eq 31 ]
}

@test "grpo-summary --json: first, last, best with steps, means, seconds, tokens/s" {
    run "$S/grpo-summary" --json "$FIX/a.jsonl"
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" | jq -e '
        .updates == 6 and .first_step == 1 and .last_step == 6 and .evals == 3
        and .first_eval_step == 0 and .last_eval_step == 6
        and .metrics.reward == {first: 0.125, first_step: 1, last: 0.625, last_step: 6, mean: 0.4375,
                                count: 6, best: 0.75, best_step: 5}
        and .metrics["eval/accuracy"].first == 0.1 and .metrics["eval/accuracy"].last == 0.35
        and (.metrics.kl | has("best") | not) and (.metrics.kl.mean - 0.158 / 6 | fabs) < 1e-12
        and .tokens == 10900 and .seconds == {updates: 24.5, evals: 6.5, total: 31}
        and (.tokens_per_second - 10900 / 24.5 | fabs) < 1e-9'
}

@test "grpo-summary errors: no file 64, missing 66, not JSON 65, an empty file is zero steps" {
    run "$S/grpo-summary"
    [ "$status" -eq 64 ]; assert_one_line_error grpo-summary "no metrics file"
    run "$S/grpo-summary" --bogus x
    [ "$status" -eq 64 ]; assert_one_line_error grpo-summary "unknown flag"
    run "$S/grpo-summary" "$FIX/a.jsonl" nope.jsonl
    [ "$status" -eq 66 ]; assert_one_line_error grpo-summary "nope.jsonl"
    mkdir d
    run "$S/grpo-summary" d
    [ "$status" -eq 66 ]; assert_one_line_error grpo-summary "d: no metrics.jsonl"
    printf '{"step":1}\n{"step":\n' > bad.jsonl
    run "$S/grpo-summary" bad.jsonl
    [ "$status" -eq 65 ]; assert_one_line_error grpo-summary "bad.jsonl: not JSON lines"
    : > empty.jsonl
    run "$S/grpo-summary" empty.jsonl
    [ "$status" -eq 0 ]
    [ "$(sed -n 2p <<< "$output")" = "steps     0 updates (steps -), 0 evals (steps -)" ]
}

@test "grpo-compare: two runs side by side per step and at the end, B - A (exact output)" {
    run "$S/grpo-compare" "$FIX/a.jsonl" "$FIX/b.jsonl"
    [ "$status" -eq 0 ]
    diff <(printf '%s\n' "$output") - <<EOF
A  $FIX/a.jsonl
B  $FIX/b.jsonl

  step   reward A   reward B       kl A       kl B eval acc A eval acc B
     0          -          -          -          -     0.1000     0.1000
     1     0.1250     0.2000     0.0000          -          -          -
     2     0.2500     0.3000     0.0120          -          -          -
     3     0.3750     0.4500     0.0250          -     0.2000          -
     4     0.5000     0.5000     0.0300          -          -     0.3000
     5     0.7500          -     0.0410          -          -          -
     6     0.6250          -     0.0500          -     0.3500          -

                                    A          B        B-A
updates                             6          4         -2
last step                           6          4         -2
reward first                   0.1250     0.2000     0.0750
reward last                    0.6250     0.5000    -0.1250
reward best                    0.7500     0.5000    -0.2500
eval/accuracy first            0.1000     0.1000     0.0000
eval/accuracy last             0.3500     0.3000    -0.0500
eval/accuracy best             0.3500     0.3000    -0.0500
kl mean                        0.0263          -          -
completion length last          29.00      33.00       4.00
tokens/s                        444.9      390.0      -54.9
seconds                        31.000     31.000      0.000
EOF
}

@test "grpo-compare --every N keeps steps divisible by N and each run's last; errors" {
    run "$S/grpo-compare" --every 3 "$FIX/a.jsonl" "$FIX/b.jsonl"
    [ "$status" -eq 0 ]
    [ "$(sed -n '5,$p' <<< "$output" | sed '/^$/,$d' | awk '{print $1}' | paste -sd ' ')" = "0 3 4 6" ]
    run "$S/grpo-compare" "$FIX/a.jsonl"
    [ "$status" -eq 64 ]; assert_one_line_error grpo-compare "expected two runs, got 1"
    run "$S/grpo-compare" --every 0 "$FIX/a.jsonl" "$FIX/b.jsonl"
    [ "$status" -eq 64 ]; assert_one_line_error grpo-compare "--every"
    run "$S/grpo-compare" "$FIX/a.jsonl" nope.jsonl
    [ "$status" -eq 66 ]; assert_one_line_error grpo-compare "nope.jsonl"
    echo '{' > bad.jsonl
    run "$S/grpo-compare" bad.jsonl "$FIX/a.jsonl"
    [ "$status" -eq 65 ]; assert_one_line_error grpo-compare "bad.jsonl"
}

# png_size FILE: "WIDTH HEIGHT" from the PNG's IHDR chunk.
png_size() { od -An -tu1 -j16 -N8 "$1" | awk '{ print $1*16777216 + $2*65536 + $3*256 + $4, $5*16777216 + $6*65536 + $7*256 + $8 }'; }

@test "grpo-plot draws a PNG of the size asked; with no KL (beta 0) too; written whole" {
    command -v gnuplot > /dev/null || skip "no gnuplot (make deps)"
    run "$S/grpo-plot" "$FIX/a.jsonl" a.png
    [ "$status" -eq 0 ]; [ -z "$output" ]
    [ "$(head -c 8 a.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
    [ "$(stat -c %s a.png)" -gt 10000 ]
    [ "$(png_size a.png)" = "900 700" ]
    "$S/grpo-plot" --size 640,480 --title "run b's curves" "$FIX/b.jsonl" b.png
    [ "$(png_size b.png)" = "640 480" ]
    [ "$(stat -c %s b.png)" -gt 10000 ]
    # an eval-only file (the step-0 eval of a run that has not trained yet) plots too
    head -n 1 "$FIX/a.jsonl" > e.jsonl
    "$S/grpo-plot" e.jsonl e.png
    [ "$(stat -c %s e.png)" -gt 5000 ]
    # different data, different picture
    ! cmp -s a.png b.png || false
    no_temp_left .
}

@test "grpo-plot errors: missing file 66, nothing to plot 65, usage 64; OUT untouched" {
    command -v gnuplot > /dev/null || skip "no gnuplot (make deps)"
    echo keep > out.png
    run "$S/grpo-plot" nope.jsonl out.png
    [ "$status" -eq 66 ]; assert_one_line_error grpo-plot "nope.jsonl"
    echo '{"kind":"other","step":1}' > other.jsonl
    run "$S/grpo-plot" other.jsonl out.png
    [ "$status" -eq 65 ]; assert_one_line_error grpo-plot "no update or eval line"
    run "$S/grpo-plot" "$FIX/a.jsonl"
    [ "$status" -eq 64 ]; assert_one_line_error grpo-plot "expected METRICS.jsonl and OUT.png"
    run "$S/grpo-plot" --size 10x10 "$FIX/a.jsonl" out.png
    [ "$status" -eq 64 ]; assert_one_line_error grpo-plot "--size"
    [ "$(cat out.png)" = keep ]
    no_temp_left .
}

@test "grpo-samples: a readable log of each step's completions (exact output)" {
    run "$S/grpo-samples" "$FIX/scored.jsonl" 2
    [ "$status" -eq 0 ]
    diff <(printf '%s\n' "$output") - <<EOF
== $FIX/scored.jsonl: 6 completions of 3 prompts, policy step-3, mean reward 0.3833, accuracy 0.5000

-- arith/1 (2 samples), answer 19
user: What is 12 + 7?
rewards: 1.2 0 (mean 0.6000)
sample 0: 4 tokens, stop, reward 1.2 (answer 1, format 1):
    <think>12 + 7 = 19</think>
    <answer>19</answer>

-- count/2 (2 samples), target 15 from [3,5]
user: Using the numbers [3, 5], create an equation that equals 15.
rewards: 0 1.1 (mean 0.5500)
sample 0: 2 tokens, stop, reward 0 (answer 0, format 0):
    3 + 5
EOF
}

@test "grpo-samples --group shows every completion, control characters as ?; -n; zstd; several files" {
    run "$S/grpo-samples" --group -n 1 "$FIX/scored.jsonl"
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | tail -n 2)" = "$(printf 'sample 1: 5 tokens, length, reward 0 (answer 0, format 0):\n    It is 18?[0m')" ]
    [ "$(printf '%s\n' "$output" | grep -c '^-- ')" -eq 1 ]
    [ "$(printf '%s\n' "$output" | grep -c '^sample ')" -eq 2 ]
    # a file without answers: no accuracy in the header; null entries shown as null
    sed -n '5,6p' "$FIX/scored.jsonl" | zstd -q > free.jsonl.zst
    run "$S/grpo-samples" free.jsonl.zst "$FIX/scored.jsonl" 5
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | head -n 1)" = "== free.jsonl.zst: 2 completions of 1 prompts, policy step-3, mean reward 0.0000" ]
    printf '%s\n' "$output" | grep -qx 'sample 0: 1 tokens, stop, reward 0 (answer null, format 0):'
    [ "$(printf '%s\n' "$output" | grep -c '^== ')" -eq 2 ]
    [ "$(printf '%s\n' "$output" | grep -c '^-- ')" -eq 4 ]
}

@test "grpo-samples errors: 64 usage, 66 missing (before any output), 65 not JSON" {
    run "$S/grpo-samples"
    [ "$status" -eq 64 ]; assert_one_line_error grpo-samples "no scored file"
    run "$S/grpo-samples" -n x "$FIX/scored.jsonl"
    [ "$status" -eq 64 ]; assert_one_line_error grpo-samples "N must be an integer"
    run "$S/grpo-samples" "$FIX/scored.jsonl" nope.jsonl
    [ "$status" -eq 66 ]; assert_one_line_error grpo-samples "nope.jsonl"
    echo 'x' > bad.jsonl
    run "$S/grpo-samples" bad.jsonl
    [ "$status" -eq 65 ]; assert_one_line_error grpo-samples "bad.jsonl: not JSON lines"
}

# Two multi-turn records of one prompt (formats/rollout.md: completion_mask,
# null logprobs at environment tokens, turns, finish_reason env) and one
# single-turn record, scored by grpo-reward --fn env,answer.
turns_scored() {
    printf '%s\n' \
        '{"id":"calc/1","messages":[{"role":"user","content":"6*7?"}],"answer":"42","sample":0,"prompt_tokens":[1,2],"completion_tokens":[5,6,7,8,9,10,2],"completion_mask":[1,1,0,0,0,1,1],"logprobs":[-0.1,-0.2,null,null,null,-0.3,-0.4],"turns":[{"role":"assistant","content":"","tool_calls":[{"name":"calc","arguments":{"expr":"6*7"}}]},{"role":"tool","content":"42"},{"role":"assistant","content":"<answer>42</answer>"}],"completion":"<answer>42</answer>","finish_reason":"env","env_reward":1}' \
        '{"id":"calc/1","messages":[{"role":"user","content":"6*7?"}],"answer":"42","sample":1,"prompt_tokens":[1,2],"completion_tokens":[5,2,7,8,5,2],"completion_mask":[1,1,0,0,1,1],"logprobs":[-0.1,-0.2,null,null,-0.3,-0.4],"turns":[{"role":"assistant","content":"40"},{"role":"user","content":"higher\nplease"},{"role":"assistant","content":"41"}],"completion":"41","finish_reason":"turns"}' \
        '{"id":"arith/2","messages":[{"role":"user","content":"1+1?"}],"answer":"2","sample":0,"prompt_tokens":[1,2],"completion_tokens":[5,6,2],"logprobs":[-0.1,-0.2,-0.3],"completion":"<answer>2</answer>","finish_reason":"stop"}' |
        grpo-reward --fn env,answer --quiet
}

@test "grpo-samples shows a multi-turn record turn by turn, with the model's token count" {
    turns_scored > s.jsonl
    run "$S/grpo-samples" --group s.jsonl
    [ "$status" -eq 0 ]
    diff <(printf '%s\n' "$output") - <<'EOF'
== s.jsonl: 3 completions of 2 prompts, mean reward 1.0000, accuracy 0.6667

-- calc/1 (2 samples), answer 42
user: 6*7?
rewards: 2 0 (mean 1.0000)
sample 0: 7 tokens (4 the model's), env, reward 2 (env 1, answer 1), 3 turns:
    assistant:
        tool calls: [{"name":"calc","arguments":{"expr":"6*7"}}]
    tool:
        42
    assistant:
        <answer>42</answer>
sample 1: 6 tokens (4 the model's), turns, reward 0 (env null, answer 0), 3 turns:
    assistant:
        40
    user:
        higher
        please
    assistant:
        41

-- arith/2 (1 samples), answer 2
user: 1+1?
rewards: 1 (mean 1.0000)
sample 0: 3 tokens, stop, reward 1 (env null, answer 1):
    <answer>2</answer>
EOF
}

@test "the eval line of multi-turn records: accuracy of the last answer, the model's tokens as length" {
    turns_scored > s.jsonl
    run jq -n -c -L "$S/lib" 'include "eval"; eval_line(inputs; 3; 2; [1, 2]; 1; 0.5)' s.jsonl
    [ "$status" -eq 0 ]
    # lengths 4 + 4 + 3 (not 7 + 6 + 3); sample 1's turn bound is no truncation
    [ "$output" = '{"kind":"eval","step":3,"eval/accuracy":0.6666666666666666,"eval/pass@1":0.75,"eval/pass@2":1,"eval/reward":1,"eval/completion_length":3.6666666666666665,"eval/clipped_ratio":0,"eval/prompts":2,"eval/k":2,"eval/temperature":1,"eval/seconds":0.5}' ] ||
        { echo "$output"; false; }
}

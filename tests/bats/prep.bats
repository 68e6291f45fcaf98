#!/usr/bin/env bats
# grpo-prep: every task on fixtures or generated output, every flag, and
# independent checks (python3) of generated answers, countdown reachability,
# ids, splits and shards.
load helpers

FIX="$GRPO_ROOT/tests/fixtures/prep"

THINK='Think step by step inside <think> </think> tags, then give only the final answer inside <answer> </answer> tags, in this form: <think> your reasoning </think><answer> your answer </answer>'
ANSWER='Give only the final answer inside <answer> </answer> tags, in this form: <answer> your answer </answer>'

# ids_unique FILE: no id appears twice.
ids_unique() {
    [ "$(jq -r .id "$1" | sort | uniq -d | wc -l)" -eq 0 ]
}

@test "gsm8k: id, task, messages, answer after ####, question and solution passed through" {
    grpo-prep --task gsm8k --in "$FIX/gsm8k.jsonl" --out out.jsonl
    [ "$(wc -l < out.jsonl)" -eq 5 ]
    [ "$(jq -r .id out.jsonl | paste -sd ' ')" = "gsm8k/1 gsm8k/2 gsm8k/3 gsm8k/4 gsm8k/5" ]
    [ "$(jq -r .answer out.jsonl | paste -sd ' ')" = "66 1250 12 2505 105" ]
    [ "$(jq -r .task out.jsonl | sort -u)" = gsm8k ]
    [ "$(jq -c 'keys_unsorted' out.jsonl | sort -u)" = '["id","task","messages","answer","question","solution"]' ]
    # messages: the format's system instruction, then the question
    [ "$(jq -r '.messages | map(.role) | join(",")' out.jsonl | sort -u)" = "system,user" ]
    [ "$(jq -r '.messages[0].content' out.jsonl | sort -u)" = "$THINK" ]
    diff <(jq -r '.messages[1].content' out.jsonl) <(jq -r .question "$FIX/gsm8k.jsonl")
    # the worked solution is kept whole under "solution", the question as it was
    diff <(jq -c '[.question, .solution]' out.jsonl) <(jq -c '[.question, .answer]' "$FIX/gsm8k.jsonl")
}

@test "math: answer is the last \\boxed{} or \\fbox{} with nested braces; level and type pass through" {
    grpo-prep --task math --in "$FIX/math.jsonl" --out out.jsonl
    run jq -r .answer out.jsonl
    [ "$output" = $'\\frac{3}{4}\n4\n\\{-3, 3\\}\n7\n8' ]
    [ "$(jq -r .id out.jsonl | paste -sd ' ')" = "math/1 math/2 math/3 math/4 math/5" ]
    [ "$(jq -c 'keys_unsorted' out.jsonl | sort -u)" = '["id","task","messages","answer","problem","level","type","solution"]' ]
    diff <(jq -c '[.messages[1].content, .problem, .level, .type, .solution]' out.jsonl) \
        <(jq -c '[.problem, .problem, .level, .type, .solution]' "$FIX/math.jsonl")
    [ "$(jq -r .task out.jsonl | sort -u)" = math ]
}

@test "mbpp: the prompt shows the task and first test; tests carry every assert with the set-up, and pass" {
    grpo-prep --task mbpp --in "$FIX/mbpp.jsonl" --out out.jsonl
    [ "$(jq -r .id out.jsonl | paste -sd ' ')" = "mbpp/1 mbpp/2 mbpp/3" ]
    [ "$(jq -s 'map(has("answer")) | any' out.jsonl)" = false ]
    jq -r '.messages[1].content' out.jsonl > user.txt
    grep -qxF 'Write a function to return the larger of two numbers.' user.txt
    grep -qxF 'Your code should pass this test:' user.txt
    grep -qxF 'assert bigger(3, 9) == 9' user.txt
    ! grep -qF 'assert bigger(-1, -5)' user.txt || false
    [ "$(jq -c .tests out.jsonl | head -n 1)" = '["assert bigger(3, 9) == 9","assert bigger(-1, -5) == -1","assert bigger(4, 4) == 4"]' ]
    # test_setup_code (and the sanitized set's test_imports) go in front of each assert
    [ "$(jq -c .tests out.jsonl | sed -n 2p)" = '["import math\nassert vowels('"'banana'"') == 3","import math\nassert vowels('"'xyz'"') == 0"]' ]
    [ "$(jq -c .tests out.jsonl | sed -n 3p)" = '["import sys\nassert squares([1, 2]) == [1, 4]"]' ]
    [ "$(jq -c 'keys_unsorted' out.jsonl | head -n 1)" = '["id","task","messages","tests","task_id","text","code","test_list","test_setup_code","challenge_test_list"]' ]
    # each test runs on its own after the reference code, as a reward would run it
    "$PY" - out.jsonl <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    assert len(r["tests"]) == len(r["test_list"])
    for t in r["tests"]:
        exec(r["code"] + "\n" + t, {})
EOF
}

@test "jsonl: prompt and answer fields, the record's own id, task and messages" {
    cat > in.jsonl <<'EOF'
{"id":"q-1","prompt":"What is 2+2?","answer":"4","x":1e400}
{"prompt":"Name a color.","answer":7,"task":"colors"}
{"id":9,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"answer":null}
{"prompt":[{"role":"user","content":"Count to 3."}]}
EOF
    grpo-prep --task jsonl --in in.jsonl --out out.jsonl
    [ "$(jq -r .id out.jsonl | paste -sd ' ')" = "q-1 jsonl/2 jsonl/3 jsonl/4" ]
    [ "$(jq -r .task out.jsonl | paste -sd ' ')" = "jsonl colors jsonl jsonl" ]
    # a number answer becomes its JSON text; null or missing: no answer
    [ "$(jq -c .answer out.jsonl | paste -sd ' ')" = '"4" "7" null null' ]
    [ "$(jq -c 'has("answer")' out.jsonl | paste -sd ' ')" = "true true true false" ]
    sed -n 1p out.jsonl | grep -qF '"answer":"4","prompt":"What is 2+2?","x":1e400}'
    # a string prompt gets the format's system message
    [ "$(sed -n 1p out.jsonl | jq -c '.messages')" = "$(jq -nc --arg s "$THINK" '[{role:"system",content:$s},{role:"user",content:"What is 2+2?"}]')" ]
    # a record's own messages are used as they are (no system message added)
    [ "$(sed -n 3p out.jsonl | jq -c .messages)" = '[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]' ]
    [ "$(sed -n 4p out.jsonl | jq -c .messages)" = '[{"role":"user","content":"Count to 3."}]' ]
    # the replaced non-string id is kept as source_id; the null answer passes through
    [ "$(sed -n 3p out.jsonl | jq -c '[.source_id, has("messages")]')" = '[9,true]' ]
    [ "$(sed -n 3p out.jsonl | jq -c 'keys_unsorted')" = '["id","task","messages","source_id","answer"]' ]
    [ "$(sed -n 4p out.jsonl | jq -c 'keys_unsorted')" = '["id","task","messages","prompt"]' ]
    ids_unique out.jsonl
}

@test "jsonl: --system or --format given explicitly set the system message of records with messages" {
    printf '%s\n' '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi","name":"u"}]}' \
        '{"messages":[{"role":"user","content":"Yo"}]}' > in.jsonl
    grpo-prep --task jsonl --in in.jsonl --system 'Use tags.' > s.jsonl
    [ "$(jq -c .messages s.jsonl | head -n 1)" = '[{"role":"system","content":"Use tags."},{"role":"user","content":"Hi","name":"u"}]' ]
    [ "$(jq -c .messages s.jsonl | tail -n 1)" = '[{"role":"system","content":"Use tags."},{"role":"user","content":"Yo"}]' ]
    grpo-prep --task jsonl --in in.jsonl --format answer > a.jsonl
    [ "$(jq -r '.messages[0].content' a.jsonl | sort -u)" = "$ANSWER" ]
    [ "$(jq '.messages | length' a.jsonl | paste -sd ' ')" = "2 2" ]
    # --format plain adds nothing; --system '' removes a system message
    grpo-prep --task jsonl --in in.jsonl --format plain > p.jsonl
    diff <(jq -c .messages p.jsonl) <(jq -c .messages in.jsonl)
    grpo-prep --task jsonl --in in.jsonl --system '' > n.jsonl
    [ "$(jq -c .messages n.jsonl | head -n 1)" = '[{"role":"user","content":"Hi","name":"u"}]' ]
}

@test "jsonl: --prompt-field and --answer-field; a replaced answer is kept as solution" {
    printf '%s\n' '{"text":"Capital of France?","label":"Paris","answer":"old"}' > in.jsonl
    grpo-prep --task jsonl --in in.jsonl --prompt-field text --answer-field label > out.jsonl
    [ "$(jq -r '.messages[1].content' out.jsonl)" = "Capital of France?" ]
    [ "$(jq -r .answer out.jsonl)" = Paris ]
    [ "$(jq -c 'keys_unsorted' out.jsonl)" = '["id","task","messages","answer","text","label","solution"]' ]
    [ "$(jq -r .solution out.jsonl)" = old ]
    # the input's "answer" is not the answer then, even where the label is missing
    printf '%s\n' '{"text":"q","label":null,"answer":"old"}' > nolabel.jsonl
    grpo-prep --task jsonl --in nolabel.jsonl --prompt-field text --answer-field label > nl.jsonl
    [ "$(jq -c 'keys_unsorted' nl.jsonl)" = '["id","task","messages","text","label","solution"]' ]
    # without the flags the record has no "prompt": a clear error
    run -65 grpo-prep --task jsonl --in in.jsonl
    assert_one_line_error grpo-prep 'in.jsonl:1: field "prompt": expected a string or an array of messages, got nothing'
    printf '%s\n' '{"text":"q","label":[1]}' > bad.jsonl
    run -65 grpo-prep --task jsonl --in bad.jsonl --prompt-field text --answer-field label
    assert_one_line_error grpo-prep 'bad.jsonl:1: field "label": expected a string or a number, got array'
}

@test "jsonl: a prep output read back with --task jsonl is unchanged" {
    grpo-prep --task gsm8k --in "$FIX/gsm8k.jsonl" > a.jsonl
    grpo-prep --task arith --n 20 >> a.jsonl
    grpo-prep --task countdown --n 20 >> a.jsonl
    grpo-prep --task mbpp --in "$FIX/mbpp.jsonl" >> a.jsonl
    grpo-prep --task jsonl --in a.jsonl | cmp - a.jsonl
}

# check_arith FILE: every answer is the exact value of the expression, the
# question says the same expression (plain ones) or holds its numbers in
# order (word problems), and the id is the hash of the expression.
check_arith() {
    "$PY" - "$1" <<'EOF'
import ast, hashlib, json, re, sys
def value(expr):
    # integer evaluation that fails on any division that is not exact
    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        assert isinstance(n, ast.BinOp), ast.dump(n)
        a, b = ev(n.left), ev(n.right)
        if isinstance(n.op, ast.Add): return a + b
        if isinstance(n.op, ast.Sub): return a - b
        if isinstance(n.op, ast.Mult): return a * b
        assert isinstance(n.op, ast.Div) and b != 0 and a % b == 0, (expr, a, b)
        return a // b
    return ev(ast.parse(expr, mode="eval"))
for line in open(sys.argv[1]):
    r = json.loads(line)
    expr, q = r["expression"], r["messages"][-1]["content"]
    v = value(expr)
    assert v >= 0 and r["answer"] == str(v), (expr, r["answer"], v)
    assert r["id"] == "arith/" + hashlib.sha256(expr.encode()).hexdigest()[:16], r["id"]
    if q.startswith("What is "):
        shown = q[len("What is "):-1].replace("\u00d7", "*").replace("\u00f7", "/")
        assert shown == expr, (q, expr)
        assert value(shown) == v
    else:
        nums = re.findall(r"\d+", expr)
        assert re.findall(r"\d+", q) == nums, (q, expr)
        assert q.endswith("have now?"), q
EOF
}

@test "arith: N records, answers verified independently, ids hash the expression" {
    grpo-prep --task arith --n 400 --out out.jsonl
    [ "$(wc -l < out.jsonl)" -eq 400 ]
    ids_unique out.jsonl
    check_arith out.jsonl
    [ "$(jq -r .task out.jsonl | sort -u)" = arith ]
    [ "$(jq -c 'keys_unsorted' out.jsonl | sort -u)" = '["id","task","messages","answer","expression"]' ]
    # defaults: + - * only, 2 or 3 operands of at most 2 digits, some word problems
    ! jq -r .expression out.jsonl | grep -q / || false
    jq -r .expression out.jsonl | grep -q '\*'
    [ "$(jq -r .expression out.jsonl | grep -oE '[0-9]+' | awk 'length > 2' | wc -l)" -eq 0 ]
    [ "$(jq -r '.expression | [scan("[0-9]+")] | length' out.jsonl | sort -u | paste -sd ' ')" = "2 3" ]
    words=$(jq -r '.messages[1].content' out.jsonl | grep -vc '^What is ' || true)
    [ "$words" -gt 50 ]
    [ "$words" -lt 160 ]
}

@test "arith: --digits, --ops, --terms and --word-problems shape the problems" {
    grpo-prep --task arith --n 300 --digits 3 --ops '/*-' --terms 3..4 --word-problems 0 --out out.jsonl
    check_arith out.jsonl
    ! jq -r .expression out.jsonl | grep -q '+' || false
    jq -r .expression out.jsonl | grep -q /
    [ "$(jq -r .expression out.jsonl | grep -oE '[0-9]+' | awk 'length > 3' | wc -l)" -eq 0 ]
    jq -r .expression out.jsonl | grep -qE '(^| )[0-9]{3}( |$)'
    [ "$(jq -r '.expression | [scan("[0-9]+")] | length' out.jsonl | sort -u | paste -sd ' ')" = "3 4" ]
    [ "$(jq -r '.messages[1].content' out.jsonl | grep -vc '^What is ' || true)" -eq 0 ]
    grpo-prep --task arith --n 100 --word-problems 1 --ops '+-*/' --out words.jsonl
    check_arith words.jsonl
    [ "$(jq -r '.messages[1].content' words.jsonl | grep -c '^What is ' || true)" -eq 0 ]
    run -64 grpo-prep --task arith --n 5 --ops '+%'
    assert_one_line_error grpo-prep "--ops: expected some of"
    run -64 grpo-prep --task arith --n 5 --terms 1..3
    assert_one_line_error grpo-prep "--terms: '1..3' is out of range"
    run -64 grpo-prep --task arith --n 5 --digits 10
    assert_one_line_error grpo-prep "--digits: 10 is out of range"
}

@test "arith: too small a problem space fails clearly and leaves no output" {
    # one-digit sums a + b: 81 distinct problems
    grpo-prep --task arith --n 81 --digits 1 --ops + --terms 2 --out all.jsonl
    [ "$(jq -r .expression all.jsonl | sort -u | wc -l)" -eq 81 ]
    run -64 grpo-prep --task arith --n 82 --digits 1 --ops + --terms 2 --out out.jsonl
    assert_one_line_error grpo-prep "arith: made 81 of --n 82 records.*too few distinct problems"
    [ ! -e out.jsonl ]
    no_temp_left .
}

@test "countdown: numbers and target stored, target reachable (independent search), rules stated" {
    grpo-prep --task countdown --n 150 --out out.jsonl
    [ "$(wc -l < out.jsonl)" -eq 150 ]
    ids_unique out.jsonl
    [ "$(jq -c 'keys_unsorted' out.jsonl | sort -u)" = '["id","task","messages","numbers","target"]' ]
    "$PY" - out.jsonl <<'EOF'
import hashlib, json, sys
from fractions import Fraction
def values(nums):
    # every value an expression using each number exactly once can take
    if len(nums) == 1:
        return {nums[0]}
    out = set()
    n = len(nums)
    for mask in range(1, (1 << n) - 1):
        left = [nums[i] for i in range(n) if mask >> i & 1]
        right = [nums[i] for i in range(n) if not mask >> i & 1]
        for a in values(tuple(left)):
            for b in values(tuple(right)):
                out |= {a + b, a - b, a * b}
                if b != 0:
                    out.add(a / b)
    return out
four = 0
for line in open(sys.argv[1]):
    r = json.loads(line)
    nums, target = r["numbers"], r["target"]
    assert 3 <= len(nums) <= 4 and all(isinstance(x, int) and 1 <= x <= 99 for x in nums), nums
    assert isinstance(target, int) and 1 <= target <= 999, target
    assert Fraction(target) in values(tuple(Fraction(x) for x in nums)), (nums, target)
    canon = ",".join(map(str, sorted(nums))) + ";" + str(target)
    assert r["id"] == "countdown/" + hashlib.sha256(canon.encode()).hexdigest()[:16]
    u = r["messages"][-1]["content"]
    assert u.startswith("Using the numbers [" + ", ".join(map(str, nums)) + "], create an equation that equals %d." % target), u
    assert "each number exactly once" in u and "+, -, * and /" in u, u
    four += len(nums) == 4
assert 20 < four < 130, four
EOF
}

@test "--format and --system choose the system message" {
    grpo-prep --task arith --n 5 > think.jsonl
    [ "$(jq -r '.messages[0].content' think.jsonl | sort -u)" = "$THINK" ]
    grpo-prep --task arith --n 5 --format think-answer | cmp - think.jsonl
    grpo-prep --task arith --n 5 --format answer > answer.jsonl
    [ "$(jq -r '.messages[0].content' answer.jsonl | sort -u)" = "$ANSWER" ]
    [ "$(jq -r '.messages[0].role' answer.jsonl | sort -u)" = system ]
    grpo-prep --task gsm8k --in "$FIX/gsm8k.jsonl" --format plain > plain.jsonl
    [ "$(jq -c '.messages | map(.role)' plain.jsonl | sort -u)" = '["user"]' ]
    grpo-prep --task arith --n 5 --system 'You are a calculator.' > sys.jsonl
    [ "$(jq -r '.messages[0].content' sys.jsonl | sort -u)" = "You are a calculator." ]
    grpo-prep --task arith --n 5 --format plain --system 'Sys' > ps.jsonl
    [ "$(jq -c '.messages | map(.role)' ps.jsonl | sort -u)" = '["system","user"]' ]
    grpo-prep --task arith --n 5 --system '' > none.jsonl
    [ "$(jq -c '.messages | map(.role)' none.jsonl | sort -u)" = '["user"]' ]
    # only the messages differ
    diff <(jq -c 'del(.messages)' think.jsonl) <(jq -c 'del(.messages)' none.jsonl)
    diff <(jq -c '.messages[-1]' think.jsonl) <(jq -c '.messages[-1]' none.jsonl)
    run -64 grpo-prep --task arith --n 5 --format xml
    assert_one_line_error grpo-prep "--format: expected one of think-answer\|answer\|plain"
}

@test "--n: generators make exactly N, datasets at most N (the first ones)" {
    grpo-prep --task countdown --n 7 | wc -l | grep -qx 7
    grpo-prep --task arith --n 1 | wc -l | grep -qx 1
    grpo-prep --task gsm8k --in "$FIX/gsm8k.jsonl" --n 2 > two.jsonl
    [ "$(jq -r .id two.jsonl | paste -sd ' ')" = "gsm8k/1 gsm8k/2" ]
    grpo-prep --task gsm8k --in "$FIX/gsm8k.jsonl" --n 50 | wc -l | grep -qx 5
    grpo-prep --task gsm8k --in "$FIX/gsm8k.jsonl" --n 0 | wc -l | grep -qx 5
    # the first N of a larger run: --n does not change the records
    grpo-prep --task arith --n 50 | head -n 10 > a.jsonl
    grpo-prep --task arith --n 10 | cmp - a.jsonl
    run -64 grpo-prep --task arith
    assert_one_line_error grpo-prep "--task arith needs --n N"
}

@test "--seed: the same seed gives the same bytes, another seed other problems" {
    for task in arith countdown; do
        grpo-prep --task $task --n 100 --seed 7 --out a.jsonl
        grpo-prep --task $task --n 100 --seed 7 --out b.jsonl
        cmp a.jsonl b.jsonl
        grpo-prep --task $task --n 100 --out zero.jsonl
        grpo-prep --task $task --n 100 --seed 0 | cmp - zero.jsonl
        grpo-prep --task $task --n 100 --seed 8 --out c.jsonl
        [ "$(sort a.jsonl c.jsonl | uniq -d | wc -l)" -lt 10 ]
    done
}

# many_gsm8k N: N distinct GSM8K-shaped records.
many_gsm8k() {
    local i
    for ((i = 1; i <= $1; i++)); do
        printf '{"question":"What is %d plus %d?","answer":"%d + %d = %d\\n#### %d"}\n' $i $i $i $i $((2 * i)) $((2 * i))
    done
}

@test "--split: train and test are disjoint, make the whole, and follow the id hash" {
    many_gsm8k 400 > in.jsonl
    grpo-prep --task gsm8k --in in.jsonl --out all.jsonl
    grpo-prep --task gsm8k --in in.jsonl --split train --out train.jsonl
    grpo-prep --task gsm8k --in in.jsonl --split test --out test.jsonl
    [ "$(sort train.jsonl test.jsonl | uniq -d | wc -l)" -eq 0 ]
    diff <(sort train.jsonl test.jsonl) <(sort all.jsonl)
    # input order kept within a split
    diff <(jq -r .id train.jsonl) <(jq -r .id all.jsonl | grep -Fxf <(jq -r .id train.jsonl))
    # test = SHA-256 fraction of the id below --test-fraction (default 0.1)
    "$PY" - test.jsonl train.jsonl 0.1 <<'EOF'
import hashlib, json, sys
def frac(i):
    return int.from_bytes(hashlib.sha256(i.encode()).digest()[:8], "big") / 2**64
test = [json.loads(l)["id"] for l in open(sys.argv[1])]
train = [json.loads(l)["id"] for l in open(sys.argv[2])]
x = float(sys.argv[3])
assert all(frac(i) < x for i in test) and all(frac(i) >= x for i in train)
assert 15 < len(test) < 70, len(test)
EOF
    grpo-prep --task gsm8k --in in.jsonl --split test --test-fraction 0.5 --out half.jsonl
    [ "$(wc -l < half.jsonl)" -gt 150 ]
    [ "$(wc -l < half.jsonl)" -lt 250 ]
    grpo-prep --task gsm8k --in in.jsonl --split train --test-fraction 0.5 --out half-train.jsonl
    diff <(sort half.jsonl half-train.jsonl) <(sort all.jsonl)
    # a record keeps its split when the file grows
    many_gsm8k 500 > grown.jsonl
    grpo-prep --task gsm8k --in grown.jsonl --split test | head -n "$(wc -l < test.jsonl)" | cmp - test.jsonl
    run -64 grpo-prep --task gsm8k --in in.jsonl --test-fraction 0.2
    assert_one_line_error grpo-prep "--test-fraction has no effect without --split"
}

@test "--split on a generator: N records of that split, disjoint from the other split" {
    grpo-prep --task arith --n 60 --split test --out test.jsonl
    grpo-prep --task arith --n 200 --split train --out train.jsonl
    [ "$(wc -l < test.jsonl)" -eq 60 ]
    [ "$(wc -l < train.jsonl)" -eq 200 ]
    [ "$(cat test.jsonl train.jsonl | jq -r .id | sort | uniq -d | wc -l)" -eq 0 ]
    [ "$(cat test.jsonl train.jsonl | jq -r .expression | sort | uniq -d | wc -l)" -eq 0 ]
    "$PY" - test.jsonl <<'EOF'
import hashlib, json, sys
for l in open(sys.argv[1]):
    i = json.loads(l)["id"]
    assert int.from_bytes(hashlib.sha256(i.encode()).digest()[:8], "big") / 2**64 < 0.1
EOF
    check_arith test.jsonl
}

@test "--shuffle: a deterministic permutation that depends on the seed" {
    many_gsm8k 100 > in.jsonl
    grpo-prep --task gsm8k --in in.jsonl --out plain.jsonl
    grpo-prep --task gsm8k --in in.jsonl --shuffle --out s1.jsonl
    grpo-prep --task gsm8k --in in.jsonl --shuffle --out s2.jsonl
    cmp s1.jsonl s2.jsonl
    ! cmp -s s1.jsonl plain.jsonl || false
    diff <(sort s1.jsonl) <(sort plain.jsonl)
    grpo-prep --task gsm8k --in in.jsonl --shuffle --seed 3 --out s3.jsonl
    ! cmp -s s3.jsonl s1.jsonl || false
    diff <(sort s3.jsonl) <(sort plain.jsonl)
    # --n after shuffling: the first N of the shuffled order
    grpo-prep --task gsm8k --in in.jsonl --shuffle --n 10 | cmp - <(head -n 10 s1.jsonl)
    # the order is the id's, not the file's: a reversed file shuffles alike
    tac s1.jsonl > rev.jsonl
    grpo-prep --task jsonl --in rev.jsonl --shuffle | cmp - s1.jsonl
    grpo-prep --task arith --n 30 --shuffle > g.jsonl
    diff <(sort g.jsonl) <(grpo-prep --task arith --n 30 | sort)
}

@test "--shard: shards are disjoint and together make the whole, by the id hash" {
    many_gsm8k 300 > in.jsonl
    grpo-prep --task gsm8k --in in.jsonl --out all.jsonl
    for i in 0 1 2; do grpo-prep --task gsm8k --in in.jsonl --shard $i/3 --out s$i.jsonl; done
    [ "$(sort s0.jsonl s1.jsonl s2.jsonl | uniq -d | wc -l)" -eq 0 ]
    diff <(sort s0.jsonl s1.jsonl s2.jsonl) <(sort all.jsonl)
    for i in 0 1 2; do [ "$(wc -l < s$i.jsonl)" -gt 60 ]; done
    "$PY" - s1.jsonl <<'EOF'
import hashlib, json, sys
for l in open(sys.argv[1]):
    d = hashlib.sha256(json.loads(l)["id"].encode()).digest()
    assert int.from_bytes(d[8:16], "big") % 3 == 1
EOF
    # with --split too: the shards of a split make the split
    grpo-prep --task gsm8k --in in.jsonl --split train --out train.jsonl
    for i in 0 1; do grpo-prep --task gsm8k --in in.jsonl --split train --shard $i/2; done > both.jsonl
    diff <(sort both.jsonl) <(sort train.jsonl)
}

@test "--shard on a generator: disjoint shards of the same problems an unsharded run makes" {
    grpo-prep --task countdown --n 400 --out all.jsonl
    grpo-prep --task countdown --n 40 --shard 0/4 --out s0.jsonl
    grpo-prep --task countdown --n 40 --shard 3/4 --out s3.jsonl
    [ "$(wc -l < s0.jsonl)" -eq 40 ]
    [ "$(wc -l < s3.jsonl)" -eq 40 ]
    [ "$(sort s0.jsonl s3.jsonl | uniq -d | wc -l)" -eq 0 ]
    # every sharded record is the very record the unsharded run made
    [ "$(sort s0.jsonl s3.jsonl all.jsonl | uniq -d | wc -l)" -eq 80 ]
}

@test "bad records exit 65 naming file, line and field; nothing is written" {
    printf '%s\n' '{"question":"q","answer":"1\n#### 1"}' '{"question":"q2","answer":"no marker"}' > g.jsonl
    run -65 grpo-prep --task gsm8k --in g.jsonl --out out.jsonl
    assert_one_line_error grpo-prep 'g.jsonl:2: field "answer": expected a solution ending in "#### <final answer>", got no "####"'
    [ ! -e out.jsonl ]
    no_temp_left .
    printf '%s\n' '{"question":3,"answer":"#### 1"}' > t.jsonl
    run -65 grpo-prep --task gsm8k --in t.jsonl
    assert_one_line_error grpo-prep 't.jsonl:1: field "question": expected a string, got number'
    printf '%s\n' '{"question":"q"}' > m.jsonl
    run -65 grpo-prep --task gsm8k --in m.jsonl
    assert_one_line_error grpo-prep 'm.jsonl:1: field "answer": expected a string, got nothing'
    printf '\n%s\n' '{"problem":"p","solution":"the answer is 4"}' > math.jsonl
    run -65 grpo-prep --task math --in math.jsonl
    assert_one_line_error grpo-prep 'math.jsonl:2: field "solution": expected a final answer in \\boxed\{...\}, got no \\boxed'
    printf '%s\n' '{"problem":"p","solution":"$\\boxed{\\frac{1}{2}$"}' > open.jsonl
    run -65 grpo-prep --task math --in open.jsonl
    assert_one_line_error grpo-prep 'open.jsonl:1: field "solution": the last \\boxed\{ has no matching closing brace'
    printf '%s\n' '{"text":"t","test_list":"assert f()"}' > mb.jsonl
    run -65 grpo-prep --task mbpp --in mb.jsonl
    assert_one_line_error grpo-prep 'mb.jsonl:1: field "test_list": expected an array of strings, got string'
    printf '%s\n' '[1,2]' > arr.jsonl
    run -65 grpo-prep --task jsonl --in arr.jsonl
    assert_one_line_error grpo-prep 'arr.jsonl:1: expected a JSON object, got array'
    printf '%s\n' '{"id":"","prompt":"p"}' > empty-id.jsonl
    run -65 grpo-prep --task jsonl --in empty-id.jsonl
    assert_one_line_error grpo-prep 'empty-id.jsonl:1: field "id": expected a non-empty string'
}

@test "--skip-bad skips bad records and counts them in one line" {
    {
        echo '{"question":"a","answer":"#### 1"}'
        echo '{"question":"b","answer":"no marker"}'
        echo 'not json'
        echo '{"question":"c","answer":"#### 3"}'
        echo '{"question":4,"answer":"#### 4"}'
    } > in.jsonl
    run -65 grpo-prep --task gsm8k --in in.jsonl
    run --separate-stderr grpo-prep --task gsm8k --in in.jsonl --skip-bad
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "$output" | jq -r .id | paste -sd ' ')" = "gsm8k/1 gsm8k/4" ]
    [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
    [[ "$stderr" == 'grpo-prep: skipped 3 bad records (--skip-bad); the first: in.jsonl:2: field "answer": '* ]]
    # a clean file says nothing
    run --separate-stderr grpo-prep --task gsm8k --in "$FIX/gsm8k.jsonl" --skip-bad
    [ "$status" -eq 0 ]
    [ -z "$stderr" ]
}

@test "duplicate ids exit 65 naming the id and both lines" {
    printf '%s\n' '{"id":"a","prompt":"1"}' '{"id":"b","prompt":"2"}' '{"id":"a","prompt":"3"}' > in.jsonl
    run -65 grpo-prep --task jsonl --in in.jsonl --out out.jsonl
    assert_one_line_error grpo-prep 'in.jsonl:3: duplicate id "a": line 1 has it too'
    [ ! -e out.jsonl ]
    # also with --skip-bad, and whatever the split or shard keeps
    run -65 grpo-prep --task jsonl --in in.jsonl --skip-bad --shard 1/2
    assert_one_line_error grpo-prep 'in.jsonl:3: duplicate id "a"'
    # an own id may clash with a line id
    printf '%s\n' '{"id":"jsonl/2","prompt":"1"}' '{"prompt":"2"}' > clash.jsonl
    run -65 grpo-prep --task jsonl --in clash.jsonl
    assert_one_line_error grpo-prep 'clash.jsonl:2: duplicate id "jsonl/2": line 1 has it too'
}

@test "unknown fields pass through byte for byte, in input order" {
    printf '%s\n' '{"z":{ "a" : [1, 2.50, "\u00e9"] },"question":"q","x":1e400,"answer":"s\n#### 5","big":123456789012345678901234567890,"t":true}' > in.jsonl
    grpo-prep --task gsm8k --in in.jsonl --out out.jsonl
    grep -qF ',"answer":"5","z":{ "a" : [1, 2.50, "\u00e9"] },"question":"q","x":1e400,"solution":"s\n#### 5","big":123456789012345678901234567890,"t":true}' out.jsonl
}

@test "empty input gives empty output; a missing input exits 66" {
    : > empty.jsonl
    for task in gsm8k math mbpp jsonl; do
        run grpo-prep --task $task --in empty.jsonl --out out.jsonl
        [ "$status" -eq 0 ]
        [ -f out.jsonl ]
        [ ! -s out.jsonl ]
        run --separate-stderr grpo-prep --task $task --in empty.jsonl --shuffle
        [ "$status" -eq 0 ]
        [ -z "$output" ]
        [ "$stderr" = "grpo-prep: 0 records" ]
    done
    run -66 grpo-prep --task gsm8k --in missing.jsonl --out out2.jsonl
    assert_one_line_error grpo-prep "missing.jsonl: cannot open"
    [ ! -e out2.jsonl ]
    # stdin when --in is absent or -
    grpo-prep --task gsm8k < "$FIX/gsm8k.jsonl" > a.jsonl
    grpo-prep --task gsm8k --in - < "$FIX/gsm8k.jsonl" | cmp - a.jsonl
    grpo-prep --task gsm8k --in "$FIX/gsm8k.jsonl" | cmp - a.jsonl
}

@test "flags that do not fit the task are usage errors" {
    run -64 grpo-prep --n 3
    assert_one_line_error grpo-prep "--task is required"
    run -64 grpo-prep --task arith --n 3 --in x.jsonl
    assert_one_line_error grpo-prep "--in: --task arith generates its records"
    run -64 grpo-prep --task gsm8k --digits 3
    assert_one_line_error grpo-prep "--digits applies to --task arith only"
    run -64 grpo-prep --task countdown --n 3 --ops +
    assert_one_line_error grpo-prep "--ops applies to --task arith only"
    run -64 grpo-prep --task math --prompt-field q
    assert_one_line_error grpo-prep "--prompt-field applies to --task jsonl only"
    run -64 grpo-prep --task arith --n 3 --chat-template llama3
    assert_one_line_error grpo-prep "--chat-template needs --model"
}

@test "--progress draws on stderr and leaves stdout alone" {
    run --separate-stderr grpo-prep --task arith --n 50 --progress
    [ "$status" -eq 0 ]
    [[ "$stderr" == *"grpo-prep"*"50/50 records"* ]]
    [ "$output" = "$(grpo-prep --task arith --n 50)" ]
}

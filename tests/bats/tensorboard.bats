#!/usr/bin/env bats
# grpo-tensorboard (lib/tboard: our own TFRecord and Event protobuf writer) and
# TENSORBOARD in pipelines/grpo.mk. What it writes is read back by the
# tensorboard package's own readers (tests/ref/read_tb.py, in the test venv):
# EventAccumulator for scalars and text, its TFRecord reader for the checksums.
# needs: venv
load helpers
unset MAKEFLAGS MFLAGS MAKELEVEL

FIX="$GRPO_ROOT/tests/fixtures/metrics"

# The test venv with tensorboard in it (make venv), or a visible skip.
needs_tb() {
    [ -x "$GRPO_PY" ] && "$GRPO_PY" -c 'import tensorboard' 2> /dev/null ||
        skip "no tensorboard in the test venv (make venv)"
}
tb() { "$GRPO_PY" "$GRPO_ROOT/tests/ref/read_tb.py" "$@"; }
# the one event file of DIR
event_file() { local f=("$1"/events.out.tfevents.*); [ "${#f[@]}" -eq 1 ] && [ -f "${f[0]}" ] && echo "${f[0]}"; }
# no event file (nor anything else) in DIR, if DIR exists at all
no_events() { [ ! -e "$1" ] || [ -z "$(ls -A "$1")" ]; }
# refused LINES PATTERN: metrics lines LINES (printf escapes) are exit 65 with one line
# matching PATTERN, and no event file is written
refused() {
    printf '%b\n' "$1" > m.jsonl
    run grpo-tensorboard --logdir tb m.jsonl
    [ "$status" -eq 65 ] || { echo "$1: exit $status"; return 1; }
    assert_one_line_error grpo-tensorboard "$2"
    no_events tb
}
# pairs EVENT_FILE: "TAG STEP" of every scalar and text, as TensorBoard's reader reads the file
pairs() { tb raw "$1" | grep -v '^version' | awk '{ n = split($2, t, ","); for (i = 1; i <= n; i++) print t[i] "\t" $1 }'; }

@test "every scalar, step and tag read back by TensorBoard's EventAccumulator as written" {
    needs_tb
    # update and eval lines of two fixtures, nested objects, nulls and strings, a
    # step written twice (the last line counts) and a line with its own wall time
    cat "$FIX/a.jsonl" > m.jsonl
    cat >> m.jsonl << 'EOF2'
{"step":7,"reward":0.5,"kl":null,"note":"x","flag":true,"list":[1,2],"rewards":{"answer":{"mean":0.25,"std":null},"format":{"mean":1e-7}}}
{"step":7,"reward":0.75,"big":3.4e38,"neg":-2.5}
{"step":8,"reward":1,"wall_time":1700000000.25}
{"step":9,"a\u0062":2,"c\/d":{"e\u0066":3}}
EOF2
    run grpo-tensorboard --logdir tb m.jsonl "$FIX/b.jsonl"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    f=$(event_file tb)
    [[ "$(basename "$f")" =~ ^events\.out\.tfevents\.[0-9]{10}\.[^/]+\.[0-9]+\.grpo$ ]]
    diff <(tb expect m.jsonl "$FIX/b.jsonl") <(tb scalars tb)
    # the tags as named, nested ones joined with '/'
    tb scalars tb | cut -f1 | sort -u > tags
    for tag in rewards/answer/mean rewards/format/mean eval/pass@1 ab c/d/ef; do grep -qx "$tag" tags; done
    ! grep -qx 'kl' <(tb scalars tb | awk '$2 == 7' | cut -f1) || false
    ! grep -Eqx 'note|flag|list|step|kind|wall_time|rewards/answer/std' tags || false
    [ "$(tb scalars tb | awk '$1 == "reward" && $2 == 7 { print $3 }')" = 0.75 ]
    # the first record is the file version; then each (tag, step) once, as expected
    tb raw "$f" > recs
    [ "$(sed -n 1p recs)" = "version brain.Event:2" ]
    [ "$(grep -c '^version' recs)" -eq 1 ]
    diff <(tb expect m.jsonl "$FIX/b.jsonl" | cut -f1,2) <(pairs "$f" | sort)
    # wall time: the line's own, else the time of the run
    [ "$(tb walls tb | awk '$2 == 8 { print $4 }')" = 1700000000.25 ]
    now=$(date +%s)
    tb walls tb | awk -v now="$now" '$2 == 1 && ($4 < now - 600 || $4 > now + 5) { bad = 1 } END { exit bad }'
    # beyond float's range: infinities
    printf '{"step":1,"x":1e39,"y":-1e300}\n' > inf.jsonl
    grpo-tensorboard --logdir tbi inf.jsonl
    [ "$(tb scalars tbi | cut -f3 | tr '\n' ' ')" = "inf -inf " ]
    # the script in scripts/ runs the same program
    run "$GRPO_ROOT/scripts/grpo-tensorboard" --logdir tb2 m.jsonl
    [ "$status" -eq 0 ]
    diff <(tb expect m.jsonl) <(tb scalars tb2)
}

@test "--samples: the first N completions as one text summary (plugin text, a string tensor) at STEP" {
    needs_tb
    run grpo-tensorboard --logdir tb --samples 3:"$FIX/scored.jsonl" --samples-n 2 --samples 5:"$FIX/scored.jsonl"
    [ "$status" -eq 0 ]
    tb texts tb > t.jsonl
    cat t.jsonl
    [ "$(jq -s length t.jsonl)" -eq 2 ]
    jq -e -s 'map(.tag) == ["samples/completions", "samples/completions"] and map(.step) == [3, 5]
        and all(.plugin == "text" and .dtype == 7 and (.text | length) == 1)' t.jsonl
    # two records at each step (--samples-n), each with its prompt, completion and reward
    want=$(head -n 1 "$FIX/scored.jsonl" | jq -r .completion | sed 's/^/    /')
    text=$(jq -r 'select(.step == 3) | .text[0]' t.jsonl)
    [[ "$text" == *"$want"* ]]
    [[ "$text" == *"    What is 12 + 7?"* ]]
    [ "$(grep -c '^\*\*sample [0-9]' <<< "$text")" -eq 2 ]
    [ "$(jq -r 'select(.step == 5) | .text[0]' t.jsonl | grep -c '^\*\*sample [0-9]')" -eq 2 ]
    # the default is four
    grpo-tensorboard --logdir tb4 --samples 1:"$FIX/scored.jsonl"
    [ "$(wc -l < "$FIX/scored.jsonl")" -gt 4 ]
    [ "$(tb texts tb4 | jq -r '.text[0]' | grep -c '^\*\*sample [0-9]')" -eq 4 ]
    [[ "$text" == *"**sample 1** · reward $(head -n 1 "$FIX/scored.jsonl" | jq .reward)"* ]]
    # a record whose completion is not a string is bad input
    echo '{"id":"x","completion":5}' > bad.jsonl
    run grpo-tensorboard --logdir tb3 --samples 1:bad.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-tensorboard 'bad\.jsonl:1: field "completion": expected a string, got number'
    no_events tb3
}

@test "one corrupted byte: TensorBoard's reader rejects the record (CRC); grpo-tensorboard will not append to the file" {
    needs_tb
    printf '{"step":1,"loss":0.5}\n{"step":2,"loss":0.25}\n{"step":3,"loss":0.125}\n' > m.jsonl
    grpo-tensorboard --logdir tb m.jsonl
    f=$(event_file tb)
    tb raw "$f" > before
    [ "$(cat before)" = "$(printf 'version brain.Event:2\n1 loss\n2 loss\n3 loss')" ]
    # a byte inside the second scalar record's data (40 bytes of file version, then three records of one size)
    size=$(stat -c %s "$f")
    r=$(( (size - 40) / 3 ))
    [ "$size" -eq $((40 + 3 * r)) ]
    cp "$f" good
    printf '\x55' | dd of="$f" bs=1 seek=$((40 + r + 20)) conv=notrunc status=none
    ! cmp -s good "$f" || false
    tb raw "$f" > after
    cat after
    [ "$(sed -n 1,2p after)" = "$(printf 'version brain.Event:2\n1 loss')" ]
    [[ "$(sed -n 3p after)" == "rejected: "*"crc32"* ]]
    [ "$(wc -l < after)" -eq 3 ]
    # the accumulator keeps what came before the damage only
    [ "$(tb scalars tb | cut -f2 | tr '\n' ' ')" = "1 " ]
    # a damaged length is rejected as well
    cp good "$f"
    printf '\x01' | dd of="$f" bs=1 seek=$((40 + r + 1)) conv=notrunc status=none
    [[ "$(tb raw "$f" | sed -n 3p)" == "rejected: "*"header crc32"* ]]
    # our own reader refuses to resume on a damaged file: exit 65 naming it and the byte, nothing written
    cp good "$f"
    printf '\x55' | dd of="$f" bs=1 seek=$((40 + r + 20)) conv=notrunc status=none
    printf '{"step":4,"loss":1}\n' >> m.jsonl
    run grpo-tensorboard --logdir tb m.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-tensorboard "tb/events\.out\.tfevents\.[^:]*: byte $((40 + r)): record checksum mismatch"
    [ "$(stat -c %s "$f")" -eq "$size" ]
}

@test "resume: a grown metrics file appends only the new steps; a rerun appends nothing; no step twice; writers take turns" {
    needs_tb
    head -n 3 "$FIX/a.jsonl" > m.jsonl
    grpo-tensorboard --logdir tb m.jsonl
    f=$(event_file tb)
    size=$(stat -c %s "$f")
    grpo-tensorboard --logdir tb m.jsonl
    [ "$(stat -c %s "$f")" -eq "$size" ]
    cat "$FIX/a.jsonl" > m.jsonl
    # a line of an old step with a new value is not written again either: that step is kept as first written
    printf '{"step":1,"loss":123}\n' >> m.jsonl
    grpo-tensorboard --logdir tb m.jsonl
    [ "$(event_file tb)" = "$f" ]
    [ "$(stat -c %s "$f")" -gt "$size" ]
    # every (tag, step) once
    [ -z "$(pairs "$f" | sort | uniq -d)" ]
    diff <(tb expect "$FIX/a.jsonl") <(tb scalars tb)
    # steps are kept per tag: a new tag at a step before the last update's goes in; a tag
    # at a step before its own highest (eval/accuracy has step 6) does not
    printf '{"kind":"eval","step":1,"eval/accuracy":0.5,"eval/pass@9":0.75}\n' > late.jsonl
    grpo-tensorboard --logdir tb late.jsonl
    [ "$(tb scalars tb | awk '$1 == "eval/pass@9" { print $2, $3 }')" = "1 0.75" ]
    [ "$(tb scalars tb | awk '$1 == "eval/accuracy" { print $2 }' | tr '\n' ' ')" = "0 3 6 " ]
    # a record a killed writer cut short at the end of the file: cut off, then the steps written again
    cp "$f" whole
    head -c -7 whole > "$f"
    printf '{"kind":"eval","step":2,"eval/pass@9":0.5}\n' >> late.jsonl
    grpo-tensorboard --logdir tb late.jsonl
    tb raw "$f" | tail -n 1 | grep -qx '2 eval/pass@9'
    [ -z "$(pairs "$f" | sort | uniq -d)" ]
    ! tb raw "$f" | grep -q rejected || false
    # a writer waits while another holds the directory's lock (flock)
    mkdir tbl
    flock tbl sh -c 'touch held; sleep 1; touch released' &
    while [ ! -e held ]; do sleep 0.05; done
    grpo-tensorboard --logdir tbl "$FIX/a.jsonl"
    [ -e released ]
    wait
    # writers of one directory at once take turns: one file, every step once
    for i in 1 2 3 4; do
        grpo-tensorboard --logdir tbc "$FIX/a.jsonl" & grpo-tensorboard --logdir tbc "$FIX/a.jsonl" &
        grpo-tensorboard --logdir tbc "$FIX/b.jsonl" & wait
    done
    fc=$(event_file tbc)
    [ -z "$(pairs "$fc" | sort | uniq -d)" ]
}

@test "bad input: one line naming the file, line and field, exit 65, and no event file" {
    refused '{"step":1,"loss":0.5}\n{"step":2,"loss":' '^grpo-tensorboard: m\.jsonl:2: invalid JSON at column [0-9]+'
    refused '{"step":1,"loss":0.5}\n{"loss":0.25}' 'm\.jsonl:2: field "step": expected an integer'
    refused '{"step":"3","loss":0.25}' 'm\.jsonl:1: field "step": expected an integer, got string'
    refused '{"step":-1}' 'm\.jsonl:1: field "step": expected an integer in \[0, '
    refused '{"step":1,"loss":1e400}' 'm\.jsonl:1: field "loss": expected a finite number'
    refused '{"step":1,"r":{"a":{"b":-1e999}}}' 'm\.jsonl:1: field "r/a/b": expected a finite number'
    refused '{"step":1,"wall_time":"now"}' 'm\.jsonl:1: field "wall_time": expected a number, got string'
    refused '[1]' 'm\.jsonl:1: expected a JSON object, got array'
    no_events tb
    # a good file then a bad one: nothing of the good one is written either
    printf '{"step":1,"loss":0.5}\n' > good.jsonl
    run grpo-tensorboard --logdir tb good.jsonl m.jsonl
    [ "$status" -eq 65 ]
    no_events tb
    # zstd input and stdin are read as well
    zstd -q good.jsonl -o good.jsonl.zst
    grpo-tensorboard --logdir tb good.jsonl.zst
    run grpo-tensorboard --logdir tbs - < good.jsonl
    [ "$status" -eq 0 ]
    cmp <(tail -c +41 "$(event_file tb)" | head -c 12) <(tail -c +41 "$(event_file tbs)" | head -c 12)
}

@test "usage and files: --logdir required, a FILE or --samples needed, missing inputs, no parent, bad --samples" {
    printf '{"step":1,"loss":0.5}\n' > m.jsonl
    run grpo-tensorboard m.jsonl
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-tensorboard -- '--logdir is required'
    run grpo-tensorboard --logdir tb
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-tensorboard 'no metrics FILE and no --samples'
    run grpo-tensorboard --logdir tb nope.jsonl
    [ "$status" -eq 66 ]
    assert_one_line_error grpo-tensorboard 'nope\.jsonl'
    no_events tb
    run grpo-tensorboard --logdir no/such/dir m.jsonl
    [ "$status" -eq 74 ]
    assert_one_line_error grpo-tensorboard 'no/such/dir: cannot create the log directory: No such file or directory'
    [ ! -e no ]
    touch afile
    run grpo-tensorboard --logdir afile m.jsonl
    [ "$status" -eq 74 ]
    assert_one_line_error grpo-tensorboard 'afile: cannot open the log directory'
    for bad in 1 :m.jsonl x:m.jsonl -1:m.jsonl 2: ; do
        run grpo-tensorboard --logdir tb --samples "$bad"
        [ "$status" -eq 64 ] || { echo "$bad: $status"; false; }
        assert_one_line_error grpo-tensorboard -- '--samples: expected STEP:FILE'
    done
    run grpo-tensorboard --logdir tb --samples-n 0 m.jsonl
    [ "$status" -eq 64 ]
    no_events tb
}

@test "grpo.mk: TENSORBOARD (default RUN/tb) after every step; more steps append; a rerun and make metrics add nothing twice" {
    needs_tb
    tiny="$BATS_TEST_TMPDIR/tiny"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama "$tiny" > /dev/null
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$tiny" > /dev/null
    mkdir r
    {
        echo "MODEL = $tiny"
        echo "PREP_FLAGS = --task arith --n 20 --split train --seed 1 --chat-template raw --word-problems 0 --model $tiny"
        echo "STEPS = 2"
        echo "PROMPTS_PER_STEP = 4"
        echo "K = 4"
        echo "MAX_NEW_TOKENS = 8"
        echo "ROLLOUT_FLAGS = --threads 1"
        echo "REWARD_FLAGS = --fn answer,length:0.5 --max-len 8 --overlong-buffer 6 --quiet"
        echo "UPDATE_FLAGS = --lr 1e-3 --beta 0.04 --threads 1"
        echo "EVAL_EVERY = 1"
        echo "EVAL_FLAGS = --threads 1"
        echo "EVAL_PREP_FLAGS = --task arith --n 4 --split test --seed 1 --chat-template raw --word-problems 0 --model $tiny"
    } > r/config.mk
    mk() { make --no-print-directory -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=r "$@"; }
    # step 2's rollout sees step 1 already in the event file
    mk r/steps/0001/rollouts.jsonl.zst 2> /dev/null
    f=$(event_file r/tb)
    [ "$(tb scalars r/tb | awk '$1 == "reward" { print $2 }')" = 1 ]
    mk 2> /dev/null
    diff <(tb expect r/metrics.jsonl) <(tb scalars r/tb)
    [ "$(tb texts r/tb | jq -s 'map(.step)')" = "$(jq -n '[1, 2]')" ]
    # STEPS=3 appends step 3 (and eval 3) to the same file; nothing is written twice
    mk STEPS=3 2> /dev/null
    [ "$(event_file r/tb)" = "$f" ]
    diff <(tb expect r/metrics.jsonl) <(tb scalars r/tb)
    [ -z "$(pairs "$f" | sort | uniq -d)" ]
    size=$(stat -c %s "$f")
    rm r/metrics.jsonl
    mk STEPS=3 metrics 2> /dev/null
    [ "$(stat -c %s "$f")" -eq "$size" ]
    # TENSORBOARD elsewhere (a finished run's whole history goes there), or empty: none
    rm r/metrics.jsonl
    mk STEPS=3 TENSORBOARD="$PWD/tb2" metrics 2> /dev/null
    diff <(tb expect r/metrics.jsonl) <(tb scalars tb2)
    rm -rf r/tb r/metrics.jsonl
    mk STEPS=3 TENSORBOARD= metrics 2> /dev/null
    [ ! -e r/tb ]
}

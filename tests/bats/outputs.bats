#!/usr/bin/env bats
# Where outputs go: devices, FIFOs, sockets and descriptors written
# in place, symlinks followed to their target, every output checked before
# any work (exit 73 naming the user's path), stale temporaries of killed runs
# removed, every exit code documented.
load helpers

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    [ -x "$GRPO_PY" ] || return 0
    make_tiny_llama "$TINY"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch "$BATS_FILE_TMPDIR/batch.jsonl" 8 97
}

needs_tiny() { [ -d "$TINY" ] || skip "no test venv (make venv)"; }

# The old code renamed a temporary over a device as root: should that come
# back, put /dev/null and /dev/stdout back for the rest of the machine.
teardown() {
    if [ "$(id -u)" = 0 ]; then
        [ -c /dev/null ] || { rm -f /dev/null; mknod -m 666 /dev/null c 1 3; }
        [ -L /dev/stdout ] || { rm -f /dev/stdout; ln -s /proc/self/fd/1 /dev/stdout; }
    fi
}

scored() { # scored FILE: 4 groups of 2 scored records
    awk 'BEGIN { for (i = 0; i < 8; i++) printf "{\"id\":\"g%d\",\"reward\":%d}\n", int(i / 2), i % 3 }' > "$1"
}
rollouts() { # rollouts FILE: 4 rollout records
    awk 'BEGIN { for (i = 0; i < 4; i++) printf "{\"id\":\"g%d\",\"completion\":\"<answer>%d</answer>\",\"answer\":\"%d\"}\n", int(i / 2), i, i % 3 }' > "$1"
}
REWARD="grpo-reward --fn answer --quiet"

# dead_pid: a PID no process has (checked, so the fixture cannot pass by luck)
dead_pid() {
    local p=999999
    while kill -0 "$p" 2>/dev/null; do p=$((p - 1)); done
    echo "$p"
}

@test "--out /dev/stdout piped into head: the records reach the pipe, /dev/stdout stays a link" {
    [ -L /dev/stdout ] || skip "/dev/stdout is not a symlink here"
    run bash -c 'grpo-prep --task arith --n 20 --out /dev/stdout | head -n 2 | wc -l'
    [ "$status" -eq 0 ]
    [ "$output" = 2 ]
    [ -L /dev/stdout ]
    scored s.jsonl
    [ "$(grpo-advantage --in s.jsonl --out /dev/stdout | wc -l)" = 8 ]
    [ -L /dev/stdout ]
}

@test "--out and --stats /dev/null: written to the device, which stays a device" {
    [ -c /dev/null ] || skip "/dev/null is not a character device here"
    grpo-prep --task arith --n 20 --out /dev/null
    [ -c /dev/null ]
    scored s.jsonl
    grpo-advantage --in s.jsonl --out /dev/null --stats /dev/null
    [ -c /dev/null ]
    rollouts r.jsonl
    $REWARD --in r.jsonl --out /dev/null --stats /dev/null
    [ -c /dev/null ]
}

@test "a FIFO gets the bytes (plain and .zst), and stays a FIFO" {
    grpo-prep --task arith --n 30 --out want.jsonl
    mkfifo p
    timeout 20 cat p > got & # a writer that never opens the FIFO fails here instead of hanging
    grpo-prep --task arith --n 30 --out p
    wait $! || true
    [ -p p ]
    cmp want.jsonl got
    mkfifo p.zst
    timeout 20 zstd -dcq < p.zst > gotz &
    grpo-prep --task arith --n 30 --out p.zst
    wait $! || true
    [ -p p.zst ]
    cmp want.jsonl gotz
    no_temp_left .
}

@test "--stats into a FIFO and a descriptor: written in place" {
    scored s.jsonl
    grpo-advantage --in s.jsonl --out a.jsonl --stats want.json
    mkfifo sp
    timeout 20 cat sp > got.json &
    grpo-advantage --in s.jsonl --out a2.jsonl --stats sp
    wait $! || true
    cmp want.json got.json
    grpo-advantage --in s.jsonl --out a3.jsonl --stats /dev/fd/3 3> fd.json
    cmp want.json fd.json
    [ -p sp ]
    no_temp_left .
}

@test "a socket is written in place" {
    command -v "$GRPO_PY" > /dev/null || skip "no python for the socket's reader"
    "$GRPO_PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind("sock"); s.listen(1); s.settimeout(20)
open("ready", "w").close()
c, _ = s.accept(); data = b""
while True:
    b = c.recv(65536)
    if not b: break
    data += b
open("got", "wb").write(data)' &
    for _ in $(seq 100); do [ -e ready ] && break; sleep 0.05; done
    [ -S sock ]
    grpo-prep --task arith --n 10 --out sock
    wait $! || true
    grpo-prep --task arith --n 10 --out want.jsonl
    cmp want.jsonl got
    [ -S sock ]
}

@test "a symlink to a file in another directory: the target is replaced, the link stays" {
    mkdir -p elsewhere run
    echo old > elsewhere/data.jsonl
    ln -s ../elsewhere/data.jsonl run/out.jsonl
    grpo-prep --task arith --n 5 --out run/out.jsonl
    [ -L run/out.jsonl ]
    [ "$(readlink run/out.jsonl)" = ../elsewhere/data.jsonl ]
    [ "$(wc -l < elsewhere/data.jsonl)" = 5 ]
    grpo-prep --task arith --n 5 --out want.jsonl
    cmp want.jsonl elsewhere/data.jsonl
    no_temp_left run
    no_temp_left elsewhere
    # a dangling link: the target is created
    ln -s ../elsewhere/new.jsonl run/new.jsonl
    grpo-prep --task arith --n 5 --out run/new.jsonl
    [ -L run/new.jsonl ]
    cmp want.jsonl elsewhere/new.jsonl
}

@test "a symlink to /proc/self/fd/1: the records reach stdout, the link stays" {
    ln -s /proc/self/fd/1 to-stdout
    run bash -c 'grpo-prep --task arith --n 7 --out to-stdout | wc -l'
    [ "$status" -eq 0 ]
    [ "$output" = 7 ]
    [ -L to-stdout ]
    # and /dev/fd/N of the tool's own descriptor, appended as the shell opened it
    echo first > appended
    grpo-prep --task arith --n 3 --out /dev/fd/4 4>> appended
    [ "$(wc -l < appended)" = 4 ]
    [ "$(head -n 1 appended)" = first ]
}

@test "an output in a missing directory: 73 before any work, every tool and output flag, naming the user's path" {
    mkfifo in.fifo # no writer: a tool that reads its input first hangs until timeout
    check() {
        run timeout 20 "$@"
        [ "$status" -eq 73 ] || { echo "$* -> $status: $output"; return 1; }
        printf '%s\n' "$output" | grep -q 'no/dir/' || { echo "no user path: $output"; return 1; }
        if printf '%s\n' "$output" | grep -q '\.tmp-'; then echo "internal path: $output"; return 1; fi
        [ "$(printf '%s\n' "$output" | grep -c '')" = 1 ] || { echo "not one line: $output"; return 1; }
    }
    check grpo-prep --task jsonl --in in.fifo --out no/dir/p.jsonl
    check grpo-advantage --in in.fifo --out no/dir/a.jsonl
    check grpo-advantage --in in.fifo --out a.jsonl --stats no/dir/s.json
    check $REWARD --in in.fifo --out no/dir/r.jsonl
    check $REWARD --in in.fifo --out r.jsonl --stats no/dir/s.json
    check grpo-reward cache export --judge-cache nocache.sqlite --out no/dir/c.jsonl
    check grpo-rollout --model no-model --in in.fifo --out no/dir/r.jsonl
    check grpo-update --model no-model --in in.fifo --out no/dir/ckpt
    check grpo-update --model no-model --in in.fifo --out ckpt --metrics no/dir/m.jsonl
    check grpo-export --model no-model --format hf --out no/dir/hf
    check grpo-export --model no-model --format peft --out no/dir/peft
    check grpo-export --model no-model --format gguf --out no/dir/m.gguf
    local S="$GRPO_ROOT/scripts"
    check "$S/grpo-eval" --model no-model --in in.fifo --out no/dir/e.json --step 0
    check "$S/grpo-eval" --model no-model --in in.fifo --out e.json --step 0 --samples no/dir/s.jsonl
    check "$S/grpo-plot" in.fifo no/dir/p.png
    [ "$(ls)" = in.fifo ]
}

@test "grpo-update --metrics in a missing directory fails at once: no training, no checkpoint" {
    needs_tiny
    SECONDS=0
    run grpo-update --model "$TINY" --in "$BATS_FILE_TMPDIR/batch.jsonl" --out ckpt --metrics missing/dir/m.jsonl
    [ "$status" -eq 73 ]
    assert_one_line_error grpo-update "missing/dir/m.jsonl: cannot create"
    [ "$SECONDS" -lt 5 ]
    [ ! -e ckpt ]
    no_temp_left .
    # and the same command with the directory there trains and writes both
    mkdir -p missing/dir
    grpo-update --model "$TINY" --in "$BATS_FILE_TMPDIR/batch.jsonl" --out ckpt --metrics missing/dir/m.jsonl
    [ -d ckpt ]
    [ -s missing/dir/m.jsonl ]
    # --metrics to a device: appended in place, nothing to fsync there is no error
    grpo-update --model "$TINY" --in "$BATS_FILE_TMPDIR/batch.jsonl" --out ckpt2 --metrics /dev/null
    [ -d ckpt2 ]
    [ -c /dev/null ]
}

@test "grpo-update: --metrics that cannot be written leaves the checkpoint as it was; the rerun writes both" {
    needs_tiny
    B="$BATS_FILE_TMPDIR/batch.jsonl"
    grpo-update --model "$TINY" --in "$B" --out ck --metrics m.jsonl 2> /dev/null
    cp -r ck before
    cp m.jsonl m.before
    # /dev/full opens and refuses every write: the metrics lines fail after the
    # training, and the checkpoint they belong to is not swapped in
    run grpo-update --model ck --in "$B" --out ck --metrics /dev/full
    [ "$status" -eq 74 ]
    assert_one_line_error grpo-update "/dev/full: write failed: No space left on device"
    diff -r before ck
    no_temp_left .
    # so the same command with a writable --metrics is the whole recovery
    grpo-update --model ck --in "$B" --out ck --metrics m.jsonl 2> /dev/null
    jq -e '.step == 2' ck/grpo/state.json
    [ "$(jq -c -s 'map(.step)' m.jsonl)" = "[1,2]" ]
    cmp m.before <(head -n 1 m.jsonl)
}

@test "a directory where a file goes, a file or FIFO where a checkpoint goes: 73, one line, untouched" {
    mkdir adir
    run grpo-prep --task arith --n 3 --out adir
    [ "$status" -eq 73 ]
    assert_one_line_error grpo-prep "adir: cannot create: is a directory"
    scored s.jsonl
    run grpo-advantage --in s.jsonl --stats adir
    [ "$status" -eq 73 ]
    echo keep > file
    mkfifo fifo
    for out in file fifo; do
        run timeout 20 grpo-update --model no-model --out $out
        [ "$status" -eq 73 ]
        assert_one_line_error grpo-update "$out: exists and is not a directory"
        run timeout 20 grpo-export --model no-model --format hf --out $out
        [ "$status" -eq 73 ]
        assert_one_line_error grpo-export "$out: exists and is not a directory"
    done
    [ "$(cat file)" = keep ]
    [ -p fifo ]
    run grpo-update --model no-model --out ckpt --metrics adir
    [ "$status" -eq 73 ]
    # a checkpoint needs a name: "." is a usage error, before any work
    run timeout 20 grpo-update --model no-model --out .
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-update "not usable as a checkpoint directory name"
}

@test "stale temporaries: a dead writer's is removed when the output is written, a live one's stays" {
    local dead
    dead=$(dead_pid)
    ! kill -0 "$dead" 2>/dev/null || false
    kill -0 $$
    touch ".out.jsonl.tmp-$dead" ".out.jsonl.tmp-$$" ".other.jsonl.tmp-$dead"
    grpo-prep --task arith --n 3 --out out.jsonl
    [ ! -e ".out.jsonl.tmp-$dead" ]
    [ -e ".out.jsonl.tmp-$$" ]
    [ -e ".other.jsonl.tmp-$dead" ] # another output's: not this run's business
    # one older than the boot is stale even when its PID is alive (reused)
    touch -d '1970-01-02' ".out.jsonl.tmp-$$"
    grpo-prep --task arith --n 3 --out out.jsonl
    [ ! -e ".out.jsonl.tmp-$$" ]
    # --stats of grpo-advantage goes through the same path
    scored s.jsonl
    touch ".st.json.tmp-$dead"
    grpo-advantage --in s.jsonl --out a.jsonl --stats st.json
    [ ! -e ".st.json.tmp-$dead" ]
}

@test "stale checkpoint temporaries: a dead writer's tree goes, an aside old checkpoint stays while NAME is missing" {
    needs_tiny
    local dead
    dead=$(dead_pid)
    mkdir -p ".ckpt.tmp-$dead/grpo" ".ckpt.old-$dead"
    echo partial > ".ckpt.tmp-$dead/grpo/state.json"
    grpo-export --model "$TINY" --format hf --out ckpt
    [ ! -e ".ckpt.tmp-$dead" ]
    [ -d ".ckpt.old-$dead" ] # written before ckpt existed: it may be the only whole copy
    grpo-export --model "$TINY" --format hf --out ckpt
    [ ! -e ".ckpt.old-$dead" ] # ckpt exists now: the aside copy is a leftover
    no_temp_left .
}

@test "every exit code any tool uses is in README's list" {
    local readme codes name num
    readme=$(sed -n '/^- Exit status/,/^- /p' "$GRPO_ROOT/README.md")
    [ -n "$readme" ]
    codes=$(grep -rhoE '\bEX_[A-Z]+\b' "$GRPO_ROOT/lib" "$GRPO_ROOT/bin" --include='*.c' | sort -u)
    [ -n "$codes" ]
    for name in $codes; do
        num=$(printf '#include <sysexits.h>\n%s\n' "$name" | cpp -P | tail -n 1)
        [[ $num =~ ^[0-9]+$ ]] || { echo "$name: no value"; false; }
        printf '%s\n' "$readme" | grep -qw "$num" || { echo "$name ($num) is not in README's exit status list"; false; }
    done
    for num in $(grep -rhoE '\bdie [0-9]+' "$GRPO_ROOT/scripts" | awk '{print $2}' | sort -u); do
        printf '%s\n' "$readme" | grep -qw "$num" || { echo "scripts' $num is not in README's list"; false; }
    done
}

@test "grpo-eval: --out through a symlink replaces the target (stale temporaries removed), --samples into a FIFO, --out /dev/stdout" {
    needs_tiny
    local S="$GRPO_ROOT/scripts"
    grpo-prep --task arith --n 2 --digits 1 --format plain --out p.jsonl
    local dead
    dead=$(dead_pid)
    mkdir elsewhere
    touch "elsewhere/.e.json.tmp-$dead" "elsewhere/.e.json.tmp-$$"
    ln -s elsewhere/e.json link.json
    mkfifo s.fifo
    timeout 60 cat s.fifo > got.jsonl &
    "$S/grpo-eval" --model "$TINY" --in p.jsonl --out link.json --step 0 --max-new-tokens 4 --samples s.fifo
    wait $! || true
    [ -L link.json ]
    [ -p s.fifo ]
    [ "$(jq -r .kind elsewhere/e.json)" = eval ]
    [ "$(wc -l < got.jsonl)" = 2 ]
    [ ! -e "elsewhere/.e.json.tmp-$dead" ] # a killed run's, removed
    [ -e "elsewhere/.e.json.tmp-$$" ]      # a live one's, kept
    rm "elsewhere/.e.json.tmp-$$"
    run bash -c "'$S/grpo-eval' --model '$TINY' --in p.jsonl --out /dev/stdout --step 0 --max-new-tokens 4 | jq -r .kind"
    [ "$status" -eq 0 ]
    [ "$output" = eval ]
    [ -L /dev/stdout ]
    no_temp_left .
    no_temp_left elsewhere
}

@test "two outputs that are one file (same path, ./, .., a symlink, a hard link): 64 before any work, the file untouched" {
    scored s.jsonl
    rollouts r.jsonl
    mkdir d
    echo keep > F
    ln -s F link
    ln F hard
    for pair in "F F" "F ./F" "F d/../F" "F link" "F hard" "new.json ./new.json"; do
        set -- $pair
        run -64 grpo-advantage --in s.jsonl --out "$1" --stats "$2"
        assert_one_line_error grpo-advantage "--out $1 and --stats $2 are the same file: one output would overwrite the other"
        run -64 $REWARD --in r.jsonl --out "$1" --stats "$2"
        assert_one_line_error grpo-reward "--out $1 and --stats $2 are the same file"
        [ "$(cat F)" = keep ]
        [ ! -e new.json ]
    done
    no_temp_left .
    # the judge cache is an output too, and so is the export of it
    run -64 $REWARD --in r.jsonl --out F --judge-cache link
    assert_one_line_error grpo-reward "--out F and --judge-cache link are the same file"
    run -64 grpo-reward cache export --judge-cache F --out ./F
    assert_one_line_error grpo-reward "--judge-cache F and --out ./F are the same file"
    [ "$(cat F)" = keep ]
    # stdout and devices are not files: both outputs may go there
    grpo-advantage --in s.jsonl --out /dev/null --stats /dev/null
    grpo-advantage --in s.jsonl --out - --stats - > /dev/null
    # an input replaced whole by the output is fine (read to its end first)
    cp s.jsonl x.jsonl
    grpo-advantage --in x.jsonl --out ./x.jsonl
    # an input that an output is written into as it is read is not
    run -64 $REWARD --in r.jsonl --out o.jsonl --judge-cache ./r.jsonl
    assert_one_line_error grpo-reward "--in r.jsonl and --judge-cache ./r.jsonl are the same file: the output would be written into the input"
}

@test "grpo-update --metrics that is --in: 64 before any work, the batch untouched" {
    needs_tiny
    cp "$BATS_FILE_TMPDIR/batch.jsonl" b.jsonl
    ln b.jsonl b2.jsonl
    for m in b.jsonl ./b.jsonl b2.jsonl; do
        run -64 grpo-update --model "$TINY" --in b.jsonl --out c --metrics "$m"
        assert_one_line_error grpo-update "--in b.jsonl and --metrics $m are the same file"
        [ ! -e c ]
        cmp b.jsonl "$BATS_FILE_TMPDIR/batch.jsonl"
    done
}

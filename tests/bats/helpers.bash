# Shared set-up for the bats suites. tests/run-suites.sh puts bin/ first on
# PATH and sets GRPO_ROOT and GRPO_PY (the test venv's python).
bats_require_minimum_version 1.5.0

: "${GRPO_ROOT:=$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}"
: "${GRPO_PY:=$GRPO_ROOT/.venv/bin/python}"
export PATH="$GRPO_ROOT/bin:$PATH"
# PY: a Python for what needs its standard library alone (the judge's test
# server, reading a sqlite3 file, a JSON check): the test venv's, else python3.
PY=$GRPO_PY
[ -x "$PY" ] || PY=python3
# Tools run on the CPU unless a test asks for a device: the checks held to
# fp32 and float64 references must not move to a GPU's bf16 by themselves.
export GRPO_DEVICE=cpu
# ... nor to bf16 or 8-bit weights on a CPU whose --weights auto picks them:
# rollout_weights.bats checks those formats at their own tolerances.
export GRPO_WEIGHTS=f32

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T" || return 1
}

# ref_check SCRIPT ARGS...: runs the reference tests/ref/SCRIPT in the test
# venv, shows its lines but those that passed, and fails when it does.
ref_check() {
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/$1" "${@:2}"
    echo "$output" | grep -v '^ok' || true
    [ "$status" -eq 0 ]
}

# first_line: the first line of $output (errors are one line).
first_line() { printf '%s\n' "$output" | head -n 1; }

# assert_one_line_error TOOL PATTERN: $output is exactly one line that starts
# with "TOOL: " and matches the extended regex PATTERN.
assert_one_line_error() {
    local lines
    lines=$(printf '%s\n' "$output" | grep -c '')
    if [ "$lines" != 1 ]; then
        echo "expected one line of error, got $lines:"; echo "$output"; return 1
    fi
    case "$output" in
        "$1: "*) ;;
        *) echo "error does not start with '$1: ': $output"; return 1 ;;
    esac
    if ! printf '%s\n' "$output" | grep -Eq -- "$2"; then
        echo "error does not match /$2/: $output"; return 1
    fi
}

# gone PATTERN [SECONDS]: waits until no process matches pgrep -f PATTERN, at
# most SECONDS (5); fails naming those still running after that.
gone() {
    local deadline=$((SECONDS + ${2:-5}))
    while pgrep -f "$1" > /dev/null; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "still running after ${2:-5} s: $(pgrep -a -f "$1")"; return 1
        fi
        sleep 0.02
    done
}

# no_temp_left DIR: no temporary output (".NAME.tmp-PID") is left in DIR.
no_temp_left() {
    local left
    left=$(find "${1:-.}" -maxdepth 1 -name '.*.tmp-*' | head -n 5)
    if [ -n "$left" ]; then echo "temporaries left: $left"; return 1; fi
}

# smol_tokens FILE: SmolLM2 ids of a ChatML-shaped prompt,
# <|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n
smol_tokens() { echo "1 4093 198 1780 314 216 34 27 34 47 2 198 1 520 9531 198" > "$1"; }

# make_tiny_llama DIR: a tiny random llama (2 layers, width 64) with a 97-token
# tokenizer and a ChatML template in DIR; does nothing without the test venv.
make_tiny_llama() {
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama "$1"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$1"
}

# make_wide_llama DIR: the same 256 wide with an FFN of 512 (rows of whole
# 256-value Q4_K super-blocks); does nothing without the test venv.
make_wide_llama() {
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" - "$GRPO_ROOT/tests/ref" "$1" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import model_ref
model_ref.make_tiny("llama", sys.argv[2], shape=dict(hidden_size=256, intermediate_size=512))
PY
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$1"
}

# update_fixture: grpo-update's suites' setup_file: $TINY, the tiny random
# llama with its 97-token tokenizer, and $BATS_FILE_TMPDIR/batch.jsonl, 16
# advantaged records for it (nothing without the test venv: needs_tiny skips).
update_fixture() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama "$TINY"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$TINY"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch "$BATS_FILE_TMPDIR/batch.jsonl" 16 97
}
needs_tiny() { [ -d "$TINY" ] || skip "no test venv (make venv)"; }

# start_server FLAGS...: tests/ref/judge_server.py (the local OpenAI-compatible
# test server) on a free port, in the background; sets SERVER_PID, PORT and URL.
# The suite's teardown stops it.
start_server() {
    rm -f "$T/port"
    "$PY" "$GRPO_ROOT/tests/ref/judge_server.py" --port-file "$T/port" "$@" > /dev/null 2> "$T/server.err" 3>&- &
    SERVER_PID=$!
    wait_port
    URL="http://127.0.0.1:$PORT/v1"
}

# wait_port: PORT from $T/port, once the server just started has written it (10 s at most).
wait_port() {
    local i
    for ((i = 0; i < 400; i++)); do
        [ -s "$T/port" ] && break
        sleep 0.025
    done
    PORT=$(cat "$T/port")
}

# server_setup: the setup of the stand-in's suites: in $T (without symlinks: grpo-rollout
# gives the server real paths), TOK the committed tiny tokenizer, prompts.jsonl a
# record with messages and one with prompt_tokens.
server_setup() {
    T=$(cd "$BATS_TEST_TMPDIR" && pwd -P) || return 1
    cd "$T" || return 1
    TOK="$GRPO_ROOT/tests/fixtures/tiny-tokenizer"
    printf '%s\n' '{"id":"a","messages":[{"role":"user","content":"hi"}]}' \
        '{"id":"b","prompt_tokens":[1,10,11,12,2,1,4,5]}' > prompts.jsonl
}

# free_port: a TCP port on 127.0.0.1 free now (for a server given a fixed port)
free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# rollout_server_start KIND [FLAGS...]: tests/ref/rollout_server.py (the stand-in
# for vLLM, SGLang or llama.cpp's server) on a free port, in the background, each
# generation request's body logged to $T/requests.log; sets SERVER_PID, PORT and URL.
# server_stop stops it.
rollout_server_start() {
    rm -f "$T/port"
    "$PY" "$GRPO_ROOT/tests/ref/rollout_server.py" --kind "$@" --port-file "$T/port" --log "$T/requests.log" \
        2> "$T/server.err" 3>&- &
    SERVER_PID=$!
    wait_port
    URL="http://127.0.0.1:$PORT"
}

# server_stop: the server started by rollout_server_start (or start_server) goes.
server_stop() {
    if [ -n "${SERVER_PID:-}" ]; then
        kill "$SERVER_PID" 2> /dev/null || true
        wait "$SERVER_PID" 2> /dev/null || true
    fi
    SERVER_PID=
}

# needs_bf16: skips (visibly) on a CPU without AVX-512 BF16, where
# grpo-update --compute bf16 exits 69 by design.
needs_bf16() { grep -qw avx512_bf16 /proc/cpuinfo || skip "no AVX-512 BF16 on this CPU (--compute bf16 exits 69)"; }

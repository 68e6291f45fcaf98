#!/usr/bin/env bats
# The hostile-program corpus (tests/fixtures/hostile, README there) through
# grpo-reward --fn code, one program per test: each scores 0 with the reason
# --stats gives, grpo-reward finishes unharmed (exit 0, small memory), and no
# process, file or directory of the run is left. A containment that needs a
# namespace the kernel refused here is a visible skip, never a pass.
load helpers

PY=/usr/bin/python3 # a pyenv shim lives where the sandbox's uid cannot go

setup_file() {
    # the isolation this machine gives, and the fallback's, from runs of a trivial program
    local dir="$BATS_FILE_TMPDIR" level
    echo '{"id":"probe","completion":"","tests":["pass"]}' > "$dir/probe.jsonl"
    for level in full fallback; do
        grpo-reward --fn code --code-python "$PY" $(level_flag "$level") --in "$dir/probe.jsonl" --out /dev/null \
            --stats "$dir/probe-$level.json" --quiet 2> /dev/null
    done
    MISSING_full=$(jq -r .code.isolation_missing "$dir/probe-full.json")
    MISSING_fallback=$(jq -r .code.isolation_missing "$dir/probe-fallback.json")
    export MISSING_full MISSING_fallback
    echo "# isolation missing here: ${MISSING_full:-nothing}" >&3
    echo "# with --code-no-namespaces (the fallback): $MISSING_fallback" >&3
}

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T" || return 1
    mkdir -p "$T/tmp"
    export TMPDIR="$T/tmp" # run directories are made here: checked empty afterwards
    MARK="grpo-hostile-$$-$BATS_TEST_NUMBER"
    skipped=""
    export OPENAI_API_KEY=sk-grpo-hostile-key GRPO_BATS_SECRET=hunter2-hostile # what read_secrets looks for
}

# Each test runs its program at both levels: LEVELS=full (what the kernel
# grants) and fallback (--code-no-namespaces, what a kernel that refuses
# namespaces leaves).
LEVELS="full fallback"
level_flag() { [ "$1" = full ] || echo --code-no-namespaces; }

# needs WHAT: false, and says so, when the level lacks that protection; a
# test whose every level lacked it is skipped with the reason (all_skipped).
needs() {
    local missing_var="MISSING_$LEVEL"
    if [[ ${!missing_var} == *"$1"* ]]; then
        echo "# $BATS_TEST_DESCRIPTION: not checked at the $LEVEL level, which lacks $1" >&3
        skipped="$skipped $LEVEL"
        return 1
    fi
}
all_skipped() {
    [ "$skipped" != " full fallback" ] || skip "no level here has the protection this needs"
}

# hostile CASE [SED-SCRIPT]: runs the program with the test `assert add(2,
# 3) == 5` (TIMEOUT seconds, default 1); sets reward, reason and rss_kb
# (grpo-reward's peak resident memory).
hostile() {
    sed -e "s|@MARK@|$MARK|g" -e "s|@ESCAPE_DIR@|$T/open-dir|g" -e "${2:-}" \
        "$GRPO_ROOT/tests/fixtures/hostile/$1.py" > program.py
    ! grep -q '@[A-Z_]*@' program.py || { echo "unfilled placeholder in $1.py"; return 1; }
    jq -nc --rawfile code program.py \
        '{id: "hostile", completion: ("Here is my solution:\n```python\n" + $code + "```\n"), tests: ["assert add(2, 3) == 5"]}' \
        > in.jsonl
    grpo-reward --fn code --code-python "$PY" --code-timeout "${TIMEOUT:-1}" $(level_flag "$LEVEL") \
        --in in.jsonl --out out.jsonl --stats "$MARK.json" --quiet 2> err & # MARK: signal_parent's target
    local pid=$! hwm
    rss_kb=0 # its own high-water mark, polled (rusage would count the sandboxed children too)
    while kill -0 "$pid" 2> /dev/null; do
        hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2> /dev/null) || hwm="" # gone between the check and the read
        [ -z "$hwm" ] || rss_kb=$hwm
        sleep 0.05
    done
    wait "$pid" # grpo-reward itself exits 0: the stage went on
    reward=$(jq -r .rewards.code out.jsonl)
    reason=$(jq -r '.code.reasons[0].reason' "$MARK.json")
    echo "# $1 ($LEVEL): reward $reward ($reason); grpo-reward peak RSS ${rss_kb} kB" >&3
    if [ "$LEVEL" = fallback ]; then # the downgrade is said, never silent
        grep -q '^grpo-reward: sandbox: isolation limited on request; .* go on without network isolation' err
    fi
    [ "$reward" = 0 ]
    jq -e '.code.runs == 1 and .code.failed == 1' "$MARK.json"
    [ "$rss_kb" -lt 65536 ]
}

teardown() {
    [ -z "${LISTENER:-}" ] || { kill "$LISTENER" 2> /dev/null || true; wait "$LISTENER" 2> /dev/null || true; }
    [ -z "${SOCKDIR:-}" ] || rm -rf "$SOCKDIR"
}

nothing_left() {
    run pgrep -f "_grpo_harness|$MARK"
    [ "$status" -eq 1 ] || { echo "sandboxed processes left: $output"; return 1; }
    left=$(find "$TMPDIR" -mindepth 1 | head -n 5)
    [ -z "$left" ] || { echo "left in TMPDIR: $left"; return 1; }
}

@test "hostile: an endless loop is killed at the deadline" {
    for LEVEL in $LEVELS; do
        hostile loop
        [ "$reason" = "timed out after 1s" ]
        nothing_left
    done
}

@test "hostile: a fork bomb is held to its process limit and killed at the deadline" {
    for LEVEL in $LEVELS; do
        hostile fork_bomb
        [ "$reason" = "timed out after 1s" ]
        nothing_left
        # the next run starts as usual: the bomb did not use up the process limit for good
        echo '{"id":"after","completion":"def add(a, b):\n    return a + b","tests":["assert add(2, 3) == 5"]}' > in.jsonl
        [ "$(grpo-reward --fn code --code-python "$PY" $(level_flag "$LEVEL") --in in.jsonl --quiet 2> /dev/null |
             jq .reward)" = 1 ]
    done
}

@test "hostile: a memory hog stops at the address-space limit" {
    for LEVEL in $LEVELS; do
        TIMEOUT=5 hostile memory_hog # touching 1 GiB of pages takes a while on a busy machine
        [ "$reason" = "MemoryError" ]
        nothing_left
    done
}

@test "hostile: a disk filler stops at the size of its directory" {
    for LEVEL in $LEVELS; do
        needs "read-only file system" || continue # the size limit is the run's own tmpfs
        hostile disk_filler
        [ "$reason" = "OSError: [Errno 28] No space left on device" ]
        nothing_left
    done
    all_skipped
}

@test "hostile: writes outside the run's directory fail" {
    mkdir -m 777 open-dir
    chmod 777 open-dir # anyone may write here: only the read-only mounts protect it
    for LEVEL in $LEVELS; do
        needs "read-only file system" || continue
        hostile write_outside
        [[ $reason == "PermissionError: could not write outside: "*"Read-only file system"* ]]
        [ -z "$(ls -A open-dir)" ]
        [ ! -e "/tmp/grpo-hostile-escaped-$MARK" ]
        [ ! -e "$T/escaped-$MARK" ]
        nothing_left
    done
    all_skipped
}

@test "hostile: the parent's environment and API key are not readable through /proc" {
    for LEVEL in $LEVELS; do
        needs "a separate identity" || continue # the caller's own uid may read its processes' environ
        hostile read_secrets
        [[ $reason == "LookupError: no secret visible"* ]]
        nothing_left
    done
    all_skipped
}

@test "hostile: SIGKILL to its parent, grpo-reward or every process (kill -1) kills nothing" {
    for LEVEL in $LEVELS; do
        hostile signal_parent
        [[ $reason == "PermissionError: could not kill any of "*"Operation not permitted"* ]]
        nothing_left
    done
}

@test "hostile: ptrace on any visible process is refused" {
    for LEVEL in $LEVELS; do
        hostile ptrace_parent
        [[ $reason == "PermissionError: could not attach to "*" processes: ['Operation not permitted']" ]]
        nothing_left
    done
}

@test "hostile: TCP and UDP to 127.0.0.1 reach nothing (the listener sees nothing)" {
    # the listener looks once its stdin closes, after the runs: what they sent
    # over loopback is queued by then, so a look that does not wait sees it
    mkfifo ctl
    "$PY" -c '
import select, socket, sys
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(4)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", 0))
print(tcp.getsockname()[1], udp.getsockname()[1], flush=True)
sys.stdin.read()
ready, _, _ = select.select([tcp, udp], [], [], 0)
for s in ready:
    print("tcp connection" if s is tcp else "udp datagram", flush=True)' < ctl > listener.out 3>&- &
    listener=$!
    exec 4> ctl
    for _ in $(seq 50); do [ -s listener.out ] && break; sleep 0.1; done
    read -r tcp_port udp_port < listener.out
    [ -n "$udp_port" ]
    for LEVEL in $LEVELS; do
        hostile network "s|@PORT@|$tcp_port|;s|@UDP_PORT@|$udp_port|" 4>&-
        [ "$reason" = "PermissionError: [Errno 1] Operation not permitted" ] # the seccomp filter, at every level
        nothing_left
    done
    echo probe > "/dev/udp/127.0.0.1/$udp_port" # what the look sees: this datagram alone
    exec 4>&-
    wait "$listener"
    [ "$(tail -n +2 listener.out)" = "udp datagram" ] || { cat listener.out; false; }
}

@test "hostile: a host process's Unix socket cannot be reached (the listener sees nothing)" {
    # under /tmp, not the test's own directory: the sandbox's uid may search the way there, so only
    # the sandbox stands between the program and the socket
    SOCKDIR=$(mktemp -d /tmp/grpo-hostile-sock-XXXXXX)
    chmod 755 "$SOCKDIR"
    "$PY" -c '
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(4)
print("listening", flush=True)
s.settimeout(30)
while True:
    c, _ = s.accept()
    print("connection", flush=True)
    c.sendall(b"pong\n"); c.close()' "$SOCKDIR/host.sock" > listener.out &
    LISTENER=$!
    for _ in $(seq 50); do [ -s listener.out ] && break; sleep 0.1; done
    [ "$(cat listener.out)" = listening ]
    for LEVEL in $LEVELS; do
        hostile unix_socket "s|@SOCKET@|$SOCKDIR/host.sock|"
        [ "$reason" = "PermissionError: [Errno 1] Operation not permitted" ] # the seccomp filter, at every level
        nothing_left
    done
    sleep 0.2
    [ "$(cat listener.out)" = listening ]
}

# The program's run reports values, never a verdict: each of these would pass
# a harness whose run decided the verdict itself.
@test "hostile: walking the frames to the harness's verdict passes nothing, even a test that is only assert False" {
    for LEVEL in $LEVELS; do
        hostile frame_walk
        [ "$reason" = "LookupError: no verdict to forge" ]
        nothing_left
    done
    jq -nc --rawfile code "$GRPO_ROOT/tests/fixtures/hostile/frame_walk.py" \
        '{id: "hostile", completion: $code, tests: ["assert False"]}' > in.jsonl
    grpo-reward --fn code --code-python "$PY" --in in.jsonl --out out.jsonl --stats st.json --quiet
    [ "$(jq .rewards.code out.jsonl)" = 0 ]
    jq -e '.code.runs == 0 and .code.refused == 1 and .code.refusals[0].reason == "no assert reads anything the program computes"' st.json
    nothing_left
}

@test "hostile: an answer equal to everything (__eq__, an int subclass) is no plain value" {
    for LEVEL in $LEVELS; do
        hostile always_equal
        [ "$reason" = "TypeError: a value of type Anything is not plain data" ]
        hostile int_subclass
        [ "$reason" = "TypeError: a value of type Agreeable is not plain data" ]
        nothing_left
    done
}

@test "hostile: the test's expected value is nowhere in the program's run" {
    for LEVEL in $LEVELS; do
        hostile read_tests
        [ "$reason" = "LookupError: the expected value is not in sight" ]
        nothing_left
    done
}

@test "hostile: builtins patched so that the test never runs report no value" {
    for LEVEL in $LEVELS; do
        hostile monkeypatch_builtins
        [ "$reason" = "exited 0 before the test finished" ]
        nothing_left
    done
}

@test "hostile: result-like output, an exit 0 before the test, os._exit in the function, verdicts on the report pipe" {
    for LEVEL in $LEVELS; do
        hostile fake_output
        [ "$reason" = "exited 0 before the test finished" ]
        hostile early_exit
        [ "$reason" = "exited 0 before the test finished" ]
        hostile report_fd
        [ "$reason" = "the report is not one line per value" ]
        nothing_left
    done
}

@test "hostile: a daemon (setsid, double fork) does not outlive its run" {
    for LEVEL in $LEVELS; do
        needs "a PID namespace" || continue # without one, only the process group is killed; setsid leaves it
        hostile daemon
        [ "$reason" = "exited 0 before the test finished" ]
        nothing_left
    done
    all_skipped
}

@test "hostile: closing every descriptor leaves the run without its report, and grpo-reward unharmed" {
    for LEVEL in $LEVELS; do
        hostile close_fds
        [[ $reason =~ ^exit\ status\ [0-9]+$ ]] # its stderr is gone with the rest: nothing to quote
        nothing_left
    done
}

@test "hostile: flooding stdout and stderr costs grpo-reward no memory, and the run ends at the deadline" {
    for LEVEL in $LEVELS; do
        hostile flood_output
        [ "$reason" = "timed out after 1s" ]
        nothing_left
    done
}

@test "hostile: a 64 MiB line is read and dropped, only its head kept" {
    for LEVEL in $LEVELS; do
        TIMEOUT=5 hostile enormous_line
        [ "$reason" = "exit status 1 after more than 4096 bytes of output" ]
        nothing_left
    done
}

@test "hostile: rlimits cannot be raised back up" {
    for LEVEL in $LEVELS; do
        hostile raise_rlimits
        [[ $reason == "PermissionError: no limit raised: "* ]]
        nothing_left
    done
}

#!/usr/bin/env bats
# The hostile-program corpus (tests/fixtures/hostile, README there) through
# grpo-reward --fn code, one program per test: each scores 0 with the reason
# --stats gives, grpo-reward finishes unharmed (exit 0, small memory), and no
# process, file or directory of the run is left. A containment that needs a
# namespace the kernel refused here is a visible skip, never a pass.
load helpers

PY=/usr/bin/python3 # a pyenv shim lives where the sandbox's uid cannot go

setup_file() {
    # the isolation this machine gives, from a run of a trivial program
    local dir="$BATS_FILE_TMPDIR"
    echo '{"id":"probe","completion":"","tests":["pass"]}' > "$dir/probe.jsonl"
    grpo-reward --fn code --code-python "$PY" --in "$dir/probe.jsonl" --out /dev/null --stats "$dir/probe.json" --quiet
    MISSING=$(jq -r .code.isolation_missing "$dir/probe.json")
    export MISSING
    echo "# isolation missing here: ${MISSING:-nothing}" >&3
}

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T" || return 1
    mkdir -p "$T/tmp"
    export TMPDIR="$T/tmp" # run directories are made here: checked empty afterwards
    MARK="grpo-hostile-$$-$BATS_TEST_NUMBER"
    export OPENAI_API_KEY=sk-grpo-hostile-key GRPO_BATS_SECRET=hunter2-hostile # what read_secrets looks for
}

# needs WHAT: skips visibly when the isolation lacks it
needs() {
    if [[ $MISSING == *"$1"* ]]; then skip "no $1 on this machine (isolation missing: $MISSING)"; fi
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
    grpo-reward --fn code --code-python "$PY" --code-timeout "${TIMEOUT:-1}" \
        --in in.jsonl --out out.jsonl --stats st.json --quiet &
    local pid=$! hwm
    rss_kb=0 # its own high-water mark, polled (rusage would count the sandboxed children too)
    while kill -0 "$pid" 2> /dev/null; do
        hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2> /dev/null) || hwm="" # gone between the check and the read
        [ -z "$hwm" ] || rss_kb=$hwm
        sleep 0.05
    done
    wait "$pid" # grpo-reward itself exits 0: the stage went on
    reward=$(jq -r .rewards.code out.jsonl)
    reason=$(jq -r '.code.reasons[0].reason' st.json)
    echo "# $1: reward $reward ($reason); grpo-reward peak RSS ${rss_kb} kB" >&3
    [ "$reward" = 0 ]
    jq -e '.code.runs == 1 and .code.failed == 1' st.json
    [ "$rss_kb" -lt 65536 ]
}

nothing_left() {
    run pgrep -f "_grpo_harness|$MARK"
    [ "$status" -eq 1 ] || { echo "sandboxed processes left: $output"; return 1; }
    left=$(find "$TMPDIR" -mindepth 1 | head -n 5)
    [ -z "$left" ] || { echo "left in TMPDIR: $left"; return 1; }
}

@test "hostile: an endless loop is killed at the deadline" {
    hostile loop
    [ "$reason" = "timed out after 1s" ]
    nothing_left
}

@test "hostile: a fork bomb is held to its process limit and killed at the deadline" {
    hostile fork_bomb
    [ "$reason" = "timed out after 1s" ]
    nothing_left
    # the next run starts as usual: the bomb did not use up anyone's process limit
    echo '{"id":"after","completion":"def add(a, b):\n    return a + b","tests":["assert add(2, 3) == 5"]}' > in.jsonl
    [ "$(grpo-reward --fn code --code-python "$PY" --in in.jsonl --quiet | jq .reward)" = 1 ]
}

@test "hostile: a memory hog stops at the address-space limit" {
    TIMEOUT=5 hostile memory_hog # touching 1 GiB of pages takes a while on a busy machine
    [ "$reason" = "MemoryError" ]
    nothing_left
}

@test "hostile: a disk filler stops at the size of its directory" {
    needs "read-only file system" # the size limit is the run's own tmpfs
    hostile disk_filler
    [ "$reason" = "OSError: [Errno 28] No space left on device" ]
    nothing_left
}

@test "hostile: writes outside the run's directory fail" {
    needs "read-only file system"
    mkdir -m 777 open-dir
    chmod 777 open-dir # anyone may write here: only the read-only mounts protect it
    rm -f "/tmp/grpo-hostile-escaped-$MARK"
    hostile write_outside
    [[ $reason == "PermissionError: could not write outside: "*"Read-only file system"* ]]
    [ -z "$(ls -A open-dir)" ]
    [ ! -e "/tmp/grpo-hostile-escaped-$MARK" ]
    [ ! -e "$T/escaped-$MARK" ]
    nothing_left
}

@test "hostile: the parent's environment and API key are not readable through /proc" {
    hostile read_secrets
    [[ $reason == "LookupError: no secret visible"* ]]
    nothing_left
}

@test "hostile: SIGKILL to its parent, grpo-reward or every process (kill -1) kills nothing" {
    hostile signal_parent
    [[ $reason == "PermissionError: could not kill any of "*"Operation not permitted"* ]]
    nothing_left
}

@test "hostile: ptrace on any visible process is refused" {
    hostile ptrace_parent
    [[ $reason == "PermissionError: could not attach to "*"Operation not permitted"* ]]
    nothing_left
}

@test "hostile: TCP and UDP to 127.0.0.1 reach nothing (the listener sees nothing)" {
    "$PY" -c '
import select, socket
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(4)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", 0))
print(tcp.getsockname()[1], udp.getsockname()[1], flush=True)
ready, _, _ = select.select([tcp, udp], [], [], 20)
for s in ready:
    print("tcp connection" if s is tcp else "udp datagram", flush=True)' > listener.out &
    listener=$!
    for _ in $(seq 50); do [ -s listener.out ] && break; sleep 0.1; done
    read -r tcp_port udp_port < listener.out
    [ -n "$udp_port" ]
    hostile network "s|@PORT@|$tcp_port|;s|@UDP_PORT@|$udp_port|"
    [ "$reason" = "PermissionError: [Errno 1] Operation not permitted" ] # the seccomp filter, at every level
    sleep 0.2
    kill "$listener" 2> /dev/null || true
    wait "$listener" 2> /dev/null || true
    [ "$(wc -l < listener.out)" -eq 1 ]
    nothing_left
}

@test "hostile: a daemon (setsid, double fork) does not outlive its run" {
    needs "a PID namespace" # without one, only the process group is killed; setsid leaves it
    rm -f "/tmp/grpo-hostile-daemon-$MARK"
    hostile daemon
    [ "$reason" = "exited 0 before the test finished" ]
    nothing_left
}

@test "hostile: closing every descriptor leaves the run without its report, and grpo-reward unharmed" {
    hostile close_fds
    [[ $reason =~ ^exit\ status\ [0-9]+$ ]] # its stderr is gone with the rest: nothing to quote
    nothing_left
}

@test "hostile: flooding stdout and stderr costs grpo-reward no memory, and the run ends at the deadline" {
    hostile flood_output
    [ "$reason" = "timed out after 1s" ]
    nothing_left
}

@test "hostile: a 64 MiB line is read and dropped, only its head kept" {
    TIMEOUT=5 hostile enormous_line
    [ "$reason" = "exit status 1 after more than 4096 bytes of output" ]
    nothing_left
}

@test "hostile: rlimits cannot be raised back up" {
    hostile raise_rlimits
    [[ $reason == "PermissionError: no limit raised: "* ]]
    nothing_left
}

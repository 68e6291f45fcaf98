# shellcheck shell=bash
# Shared by the scripts in scripts/ (sourced, bash): errors, input checks and
# reading JSONL that may be zstd-compressed. The caller sets PROG first.

# die CODE MESSAGE: one line on stderr, then exit CODE (sysexits).
die() {
    printf '%s: %s\n' "$PROG" "$2" >&2
    exit "$1"
}

# need_file PATH: exit 66 unless PATH is a readable regular file (or - for stdin).
need_file() {
    [ "$1" = - ] && return 0
    [ -e "$1" ] || die 66 "$1: no such file"
    { [ -f "$1" ] && [ -r "$1" ]; } || die 66 "$1: not a readable file"
}

# cat_jsonl PATH: the file's lines, decompressed when it is zstd (plain passes
# through; zstd refuses an empty input, which is no lines). - = stdin.
cat_jsonl() {
    if [ "$1" = - ]; then
        local t rc=0
        t=$(mktemp "${TMPDIR:-/tmp}/grpo-stdin.XXXXXX") || return 1
        cat > "$t" && cat_jsonl "$t" || rc=$?
        rm -f "$t"
        return "$rc"
    fi
    [ ! -s "$1" ] || zstd -dcfq -- "$1"
}

# is_uint S / is_number S: S is a decimal integer >= 0 / a non-negative number as JSON writes it.
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_number() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$ ]]; }

# tmp_beside PATH: a temporary name in PATH's directory (.NAME.tmp-PID), for an atomic rename.
tmp_beside() {
    local d b
    d=$(dirname -- "$1"); b=$(basename -- "$1")
    printf '%s/.%s.tmp-%s' "$d" "$b" "$$"
}

# metrics_file ARG: ARG itself, or ARG/metrics.jsonl when ARG is a run directory;
# exit 66 when there is no such file.
metrics_file() {
    if [ -d "$1" ]; then
        [ -e "$1/metrics.jsonl" ] || die 66 "$1: no metrics.jsonl in this directory"
        printf '%s/metrics.jsonl' "${1%/}"
    else
        need_file "$1"
        printf '%s' "$1"
    fi
}

# read_jsonl PATH DEST: PATH's lines (zstd or plain) into DEST, exit 65 unless each is valid JSON.
read_jsonl() {
    cat_jsonl "$1" > "$2" || die 66 "$1: cannot read"
    jq -c . "$2" > /dev/null 2>&1 || die 65 "$1: not JSON lines ($(jq -c . "$2" 2>&1 >/dev/null | head -n 1))"
}

#!/bin/bash
# merge.sh ORDER OUT SHARD...: the records of the shard files (JSONL, plain or
# zstd), each in its input order, merged into OUT in the order of the ids of
# ORDER (the prompt records the shards were made from): for each id of ORDER,
# every record with that id, as the shard holding it has them. OUT is written
# to a temporary and renamed; .zst compresses. Records pass through byte for
# byte: only their ids are read (with jq).
set -euo pipefail
die() { echo "merge.sh: $*" >&2; exit "${2:-65}"; }
[ $# -ge 3 ] || die "usage: merge.sh ORDER OUT SHARD..." 64
order=$1 out=$2
shift 2
for f in "$order" "$@"; do [ -r "$f" ] || die "$f: cannot read" 66; done

# ids as JSON strings (jq -c) never hold a raw tab, so "id<TAB>record" splits cleanly
shard_lines() {
    local f
    for f in "$@"; do
        paste -d '\t' <(zstd -dcf "$f" | jq -c '.id') <(zstd -dcf "$f")
    done
}

tmp="$out.tmp"
# a failure (a full disk) or a signal leaves no temporary
trap 'rm -f "$tmp"' EXIT
{
    zstd -dcf "$order" | jq -c '.id'
    printf '\001\n'
    shard_lines "$@"
} | awk -F '\t' -v ORDER="$order" '
    !split_seen && $0 == "\001" { split_seen = 1; next }
    !split_seen { if (!($0 in want)) { order[++n] = $0; want[$0] = 1 }; next }
    {
        id = $1
        rec = substr($0, length(id) + 2)
        if (id == "" || rec == "") { bad = "a shard line without an id or a record (a blank line?)"; exit 65 }
        if (!(id in want)) { bad = "id " id " is not in " ORDER; exit 65 }
        buf[id] = buf[id] rec "\n"
    }
    END {
        if (bad != "") { print "merge.sh: " bad > "/dev/stderr"; exit 65 }
        for (i = 1; i <= n; i++) printf "%s", buf[order[i]]
    }' | if [ "${out%.zst}" != "$out" ]; then zstd -q -c > "$tmp"; else cat > "$tmp"; fi
mv "$tmp" "$out"

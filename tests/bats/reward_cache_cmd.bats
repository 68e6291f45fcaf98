#!/usr/bin/env bats
# grpo-reward cache stats|export|import|prune: the judge cache's subcommands
# through the tool (formats/judge-cache.md).
load helpers

# entries FILE: three cache entries as export writes them (keys unsorted).
entries() {
    local k1 k2 k3
    k1=$(printf a | sha256sum | cut -c1-64); k2=$(printf b | sha256sum | cut -c1-64); k3=$(printf c | sha256sum | cut -c1-64)
    {
        printf '{"key":"%s","model":"judge-a","request":"{}","reply":"Score: 7","score":7,"prompt_tokens":12,"completion_tokens":3,"created":1000,"last_used":1000}\n' "$k1"
        printf '{"key":"%s","model":"judge-b","request":"{}","reply":"no idea","score":null,"created":%s}\n' "$k2" "$(date +%s)"
        printf '{"key":"%s","model":"judge-a","request":"{}","reply":"9","score":9,"created":%s}\n' "$k3" "$(date +%s)"
    } > "$1"
}

@test "cache import, stats and export: an export imported elsewhere exports the same bytes" {
    entries in.jsonl
    grpo-reward cache import --judge-cache a.sqlite --in in.jsonl
    run grpo-reward cache stats --judge-cache a.sqlite
    [ "$status" -eq 0 ]
    echo "$output" | jq -e '.entries == 3 and .models["judge-a"] == 2 and .models["judge-b"] == 1 and .scored == 2
                            and .prompt_tokens == 12 and .completion_tokens == 3'
    grpo-reward cache export --judge-cache a.sqlite --out a.jsonl
    [ "$(wc -l < a.jsonl)" -eq 3 ]
    # sorted by key
    jq -r .key a.jsonl | sort -c
    grpo-reward cache export --judge-cache a.sqlite | grpo-reward cache import --judge-cache b.sqlite
    grpo-reward cache export --judge-cache b.sqlite --out b.jsonl.zst
    zstd -dc b.jsonl.zst | cmp - a.jsonl
}

@test "cache prune removes by age and by model and reports how many" {
    entries in.jsonl
    grpo-reward cache import --judge-cache c.sqlite --in in.jsonl
    run grpo-reward cache prune --judge-cache c.sqlite --max-age 86400 --model judge-b
    [ "$output" = '{"removed":0,"entries":3}' ]
    run grpo-reward cache prune --judge-cache c.sqlite --max-age 86400
    [ "$output" = '{"removed":1,"entries":2}' ]
    run grpo-reward cache prune --judge-cache c.sqlite --max-age 0 --model judge-b
    [ "$output" = '{"removed":1,"entries":1}' ]
}

@test "cache: a bad import line stores nothing; usage errors are 64; a missing file is 66" {
    entries in.jsonl
    printf '{"key":"zz","model":"m","request":"{}","reply":"1","created":1}\n' >> in.jsonl
    run -65 grpo-reward cache import --judge-cache d.sqlite --in in.jsonl
    assert_one_line_error grpo-reward 'in.jsonl:4: field "key"'
    if [ -e d.sqlite ]; then
        run grpo-reward cache stats --judge-cache d.sqlite
        echo "$output" | jq -e '.entries == 0'
    fi
    run -66 grpo-reward cache stats --judge-cache none.sqlite
    assert_one_line_error grpo-reward 'none.sqlite'
    run -64 grpo-reward cache prune --judge-cache d.sqlite
    assert_one_line_error grpo-reward 'cache prune needs --max-age'
    run -64 grpo-reward cache frobnicate
    assert_one_line_error grpo-reward "expected stats, export, import or prune, got 'frobnicate'"
    run -64 grpo-reward cache
    assert_one_line_error grpo-reward "expected stats, export, import or prune"
    run grpo-reward cache --help
    [ "$status" -eq 0 ]
    [[ "$output" == *"usage: grpo-reward cache"*"--max-age SECONDS"* ]]
}

@test "cache: random bytes at the path are a clean error and stay untouched" {
    head -c 8192 /dev/urandom > junk.sqlite
    cp junk.sqlite before
    run -65 grpo-reward cache stats --judge-cache junk.sqlite
    assert_one_line_error grpo-reward 'junk.sqlite'
    cmp junk.sqlite before
}

@test "cache: the default path is under XDG_CACHE_HOME" {
    entries in.jsonl
    XDG_CACHE_HOME=$PWD/xdg grpo-reward cache import --in in.jsonl
    [ -f xdg/grpo/judge.sqlite ]
    run env XDG_CACHE_HOME=$PWD/xdg grpo-reward cache stats
    echo "$output" | jq -e '.entries == 3'
}

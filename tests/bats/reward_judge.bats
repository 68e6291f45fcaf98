#!/usr/bin/env bats
# grpo-reward --fn judge against the local OpenAI-compatible test server
# (tests/ref/judge_server.py): the cache makes reruns free and survives
# concurrent processes and kill -9, retries recover from transient faults,
# exhausted retries exit 75 and resume, and the API key stays secret.
load helpers

KEY=sk-live-4f9Qz7TzSECRETkey0

teardown() {
    if [ -n "${SERVER_PID:-}" ]; then
        kill "$SERVER_PID" 2> /dev/null || true
        wait "$SERVER_PID" 2> /dev/null || true
    fi
}

server() { curl -s "http://127.0.0.1:$PORT$1" ${2:+-d "$2"}; }
requests() { server /stats | jq .requests; }

# records FILE N [COMPLETION_SUFFIX]: N rollout records, two samples per
# prompt; each completion asks the server for score (i % 7) + 1.
records() {
    local i
    for ((i = 0; i < $2; i++)); do
        printf '{"id":"p%d","sample":%d,"messages":[{"role":"user","content":"Question %d?"}],"answer":"%d","completion":"reply %d [[score:%d]]%s"}\n' \
            $((i / 2)) $((i % 2)) $((i / 2)) $((i * 3)) "$i" $((i % 7 + 1)) "${3:-}"
    done > "$1"
}

TEMPLATE='Question: {prompt}
Reference answer: {answer}
Candidate: {completion}
Give a score from 1 to 10.'

judge() { # extra flags...
    grpo-reward --fn judge --judge-url "$URL" --judge-model judge-test --judge-template "$T/tpl.txt" \
        --judge-cache "$T/cache/judge.sqlite" "$@"
}

setup() {
    T="$BATS_TEST_TMPDIR"
    cd "$T" || return 1
    printf '%s\n' "$TEMPLATE" > tpl.txt
    export OPENAI_API_KEY=$KEY
}

# cached: answers stored in the cache file
cached() {
    "$PY" -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("select count(*) from answers").fetchone()[0])' \
        "$T/cache/judge.sqlite"
}

@test "judge: scores every record; a second run makes zero requests and writes byte-identical output" {
    start_server
    records in.jsonl 40
    run --separate-stderr judge --in in.jsonl --out out1.jsonl --stats st1.json
    [ "$status" -eq 0 ]
    jq -e -s 'length == 40 and all(.[]; .rewards.judge == (.completion | capture("score:(?<s>[0-9]+)").s | tonumber) and .reward == .rewards.judge)' out1.jsonl
    [ "$(requests)" -eq 40 ]
    [[ "$stderr" == *"grpo-reward: judge: hits 0, misses 40, "*"requests 40, "* ]]
    jq -e '.judge.requests == 40 and .judge.misses == 40 and .judge.prompt_tokens > 0' st1.json
    run --separate-stderr judge --in in.jsonl --out out2.jsonl --stats st2.json
    [ "$status" -eq 0 ]
    [ "$(requests)" -eq 40 ]
    cmp out1.jsonl out2.jsonl
    [[ "$stderr" == *"hits 40, misses 0, "*"requests 0, "* ]]
    jq -e '.judge.hits == 40 and .judge.requests == 0 and .judge.prompt_tokens == 0' st2.json
}

@test "judge: identical requests in a chunk are sent once" {
    start_server
    records one.jsonl 6
    cat one.jsonl one.jsonl one.jsonl > in.jsonl
    judge --in in.jsonl --out out.jsonl --stats st.json --quiet
    [ "$(requests)" -eq 6 ]
    jq -e '.judge.deduplicated == 12 and .judge.misses == 18' st.json
    [ "$(server /stats | jq '[.by_body[]] | max')" -eq 1 ]
}

@test "judge: two concurrent grpo-reward processes share one cache" {
    start_server --delay 0.02
    records in.jsonl 120
    judge --in in.jsonl --out a.jsonl --chunk 8 --judge-concurrency 4 --quiet 3>&- &
    pa=$!
    judge --in in.jsonl --out b.jsonl --chunk 8 --judge-concurrency 4 --quiet 3>&- &
    pb=$!
    wait "$pa"
    wait "$pb"
    cmp a.jsonl b.jsonl
    [ "$(jq -s 'length' a.jsonl)" -eq 120 ]
    [ "$(cached)" -eq 120 ]
    first=$(requests)
    [ "$first" -ge 120 ]
    [ "$first" -le 240 ]
    # shards written by two processes at once fill one cache a third run reads whole
    judge --in in.jsonl --out c.jsonl --quiet
    [ "$(requests)" -eq "$first" ]
    cmp a.jsonl c.jsonl
}

@test "judge: kill -9 mid-run, and the rerun asks only for answers not yet stored" {
    start_server --delay 0.05
    records in.jsonl 200
    # grpo-reward itself in the background (not a subshell around it), so kill -9 hits it
    grpo-reward --fn judge --judge-url "$URL" --judge-model judge-test --judge-template "$T/tpl.txt" \
        --judge-cache "$T/cache/judge.sqlite" --in in.jsonl --out out.jsonl --chunk 16 --judge-concurrency 4 \
        --quiet 3>&- &
    pid=$!
    for ((i = 0; i < 400; i++)); do
        [ "$(server /stats | jq .answered)" -ge 24 ] && break
        sleep 0.025
    done
    kill -9 "$pid"
    wait "$pid" || true
    [ ! -e out.jsonl ]
    stored=$(cached)
    [ "$stored" -ge 20 ]
    [ "$stored" -lt 200 ]
    before=$(requests)
    judge --in in.jsonl --out out.jsonl --stats st.json --quiet
    [ "$(jq -s length out.jsonl)" -eq 200 ]
    # exactly the answers missing from the cache were bought again
    [ $(($(requests) - before)) -eq $((200 - stored)) ]
    jq -e ".judge.hits == $stored" st.json
}

@test "judge: exhausted retries exit 75 with the answers so far kept; the rerun requests only the rest" {
    start_server --fail-after 10
    records in.jsonl 30
    run judge --in in.jsonl --out out.jsonl --judge-retries 1 --judge-concurrency 2
    [ "$status" -eq 75 ]
    assert_one_line_error grpo-reward "in.jsonl:[0-9]+: judge: no answer after 2 attempts \(last: HTTP 500.*rerun"
    [ ! -e out.jsonl ]
    no_temp_left .
    [ "$(cached)" -eq 10 ]
    server /control '{"fail_after": null}' > /dev/null
    before=$(requests)
    judge --in in.jsonl --out out.jsonl --quiet
    [ $(($(requests) - before)) -eq 20 ]
    [ "$(server /stats | jq .answered)" -eq 30 ]
    jq -e -s 'length == 30 and all(.[]; .reward != null)' out.jsonl
}

@test "judge: 429 with Retry-After, 500s, resets, malformed replies and timeouts are retried and succeed" {
    start_server --retry-after 0.2 --slow 5
    printf '%s\n' \
        '{"id":"a","messages":[{"role":"user","content":"q"}],"answer":"1","completion":"x [[score:3]] [[429x2]]"}' \
        '{"id":"b","messages":[{"role":"user","content":"q"}],"answer":"1","completion":"x [[score:4]] [[500x3]]"}' \
        '{"id":"c","messages":[{"role":"user","content":"q"}],"answer":"1","completion":"x [[score:5]] [[reset]][[503]]"}' \
        '{"id":"d","messages":[{"role":"user","content":"q"}],"answer":"1","completion":"x [[score:6]] [[malformed]]"}' \
        '{"id":"e","messages":[{"role":"user","content":"q"}],"answer":"1","completion":"x [[score:7]] [[slow]]"}' \
        > in.jsonl
    judge --in in.jsonl --out out.jsonl --stats st.json --judge-timeout 0.5 --quiet
    [ "$(jq -c -s 'map(.reward)' out.jsonl)" = "[3,4,5,6,7]" ]
    jq -e '.judge.retries >= 8 and .judge.retries == .judge.failures and .judge.requests == 5 + .judge.retries' st.json
    [ "$(server /stats | jq '.faults | [.["429"], .["500"], .["503"], .malformed, .slow] == [2, 3, 1, 1, 1]')" = true ]
}

@test "judge: the API key is sent, and never appears in output, stderr, --stats or the cache file" {
    start_server
    records in.jsonl 6
    run --separate-stderr judge --in in.jsonl --out out.jsonl --stats st.json
    [ "$status" -eq 0 ]
    [[ "$stderr" == *"requests 6"* && "$stderr" != *SECRETkey* ]]
    [ "$(server /stats | jq -c .auth)" = "[\"Bearer $KEY\"]" ]
    # a 401 whose message quotes the key back: not retried, exit 69, the key starred out
    printf '%s\n' '{"id":"z","messages":[{"role":"user","content":"q"}],"answer":"1","completion":"[[401]]"}' > bad.jsonl
    run judge --in bad.jsonl --out bad.out
    [ "$status" -eq 69 ]
    assert_one_line_error grpo-reward "bad.jsonl:1: judge: HTTP 401 from http://127.0.0.1:$PORT/v1/chat/completions: injected 401 for Bearer \*+ \(not retried\)"
    [ "$(server /stats | jq '.faults["401"]')" -eq 1 ]
    [[ "$output" != *SECRETkey* ]]
    ! grep -rF -e "$KEY" -e "SECRETkey" . --exclude=server.err || false
    # --judge-key-env names another variable
    teardown
    start_server
    env -u OPENAI_API_KEY JUDGE_KEY=other-key grpo-reward --fn judge --judge-url "$URL" --judge-model m \
        --judge-template tpl.txt --judge-cache-mode off --judge-key-env JUDGE_KEY --in in.jsonl --quiet > /dev/null
    [ "$(server /stats | jq -c .auth)" = '["Bearer other-key"]' ]
}

@test "judge: a reply without a number is null, counted unparsed, and cached" {
    start_server
    printf '%s\n' \
        '{"id":"a","messages":[{"role":"user","content":"q"}],"answer":"1","completion":"[[reply:I cannot grade this]]"}' \
        '{"id":"a","messages":[{"role":"user","content":"q"}],"answer":"1","completion":"[[reply:Score: 8/10]]"}' > in.jsonl
    judge --in in.jsonl --out out.jsonl --stats st.json --judge-scale 0.1 --quiet
    [ "$(jq -c -s 'map(.rewards.judge)' out.jsonl)" = "[null,0.8]" ]
    jq -e '.judge.unparsed == 1' st.json
    judge --in in.jsonl --out again.jsonl --judge-regex 'Score: (\d+)/10' --quiet
    [ "$(requests)" -eq 2 ]
    [ "$(jq -c -s 'map(.rewards.judge)' again.jsonl)" = "[null,8]" ]
}

@test "judge: missing flags are usage errors; a record without a template field is 65 naming it" {
    records in.jsonl 2
    run grpo-reward --fn judge --judge-model m --judge-template tpl.txt --in in.jsonl
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-reward "--judge-url"
    run grpo-reward --fn judge --judge-url http://127.0.0.1:9/v1 --judge-model m --judge-template nosuch.txt \
        --judge-cache-mode off --in in.jsonl
    [ "$status" -eq 66 ]
    assert_one_line_error grpo-reward "--judge-template: nosuch.txt"
    printf 'Rate {completion} given {difficulty}\n' > tpl.txt
    URL=http://127.0.0.1:9/v1
    run judge --in in.jsonl --out out.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-reward "in.jsonl:1: field \"difficulty\": the judge template \(.*tpl.txt:1\) uses it"
    [ ! -e out.jsonl ]
}

@test "judge: {turns} sends a multi-turn record's conversation as JSON, a single-turn record's completion as one message" {
    start_server
    printf 'Conversation: {turns}\nRate it.\n' > tpl.txt
    printf '%s\n' \
        '{"id":"a","messages":[{"role":"user","content":"q"}],"completion":"done","turns":[{"role":"assistant","content":"calc [[score:3]]"},{"role":"tool","content":"42"},{"role":"assistant","content":"done"}]}' \
        '{"id":"b","messages":[{"role":"user","content":"q"}],"completion":"single [[score:9]]"}' > in.jsonl
    judge --in in.jsonl --out out.jsonl --quiet
    [ "$(jq -c -s 'map(.rewards.judge)' out.jsonl)" = "[3,9]" ]
    # what the server was sent: the turns as the record wrote them
    "$PY" - "$T/cache/judge.sqlite" <<'PY'
import json, sqlite3, sys
bodies = [r[0] for r in sqlite3.connect(sys.argv[1]).execute("select request from answers")]
users = sorted(json.loads(b)["messages"][-1]["content"] for b in bodies)
assert users[0].startswith('Conversation: [{"role":"assistant","content":"calc [[score:3]]"},{"role":"tool"'), users
assert users[1] == 'Conversation: [{"role":"assistant","content":"single [[score:9]]"}]\nRate it.\n', users
PY
}

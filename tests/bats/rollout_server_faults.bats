#!/usr/bin/env bats
# grpo-rollout --server against tests/ref/rollout_server.py, a stand-in that
# speaks vLLM's, SGLang's or llama.cpp's API, refuses (400) a request without
# a field grpo-rollout must send, and misbehaves on request: the server down,
# 429 then an answer, a reply with one log-probability too few, one without
# log-probabilities, one that is not JSON, a token the tokenizer lacks. The
# tokenizer is tests/fixtures/tiny-tokenizer (97 byte-level tokens, ChatML);
# the real server is tests/bats/rollout_server.bats.
load helpers

setup() {
    server_setup
}

teardown() { server_stop; }

# fake KIND [FLAGS...]: the stand-in on a free port; sets SERVER_PID and URL.
fake() { rollout_server_start "$@"; }

rollout() { # flags...
    grpo-rollout --model "$TOK" --server "$URL" -k 2 --max-new-tokens 3 --temperature 1 --seed 5 --in prompts.jsonl "$@"
}

@test "each kind: its request shape is accepted and its reply read into well-formed records, sampler last" {
    local kind
    for kind in vllm sglang llamacpp; do
        fake "$kind"
        run --separate-stderr rollout --out "out-$kind.jsonl"
        [ "$status" -eq 0 ] || { echo "$kind: $stderr"; false; }
        [ "$(wc -l < "out-$kind.jsonl")" -eq 4 ]
        # the tokens, their count of log-probabilities, the server's finish, the sampler
        jq -e -s --arg k "$kind" 'map(.sample) == [0, 1, 0, 1] and
            all(.[]; (.completion_tokens | length) == (.logprobs | length) and .temperature == 1 and
                .policy == "fake" and .sampler == {engine: $k, model: "fake", logprobs: (if $k == "vllm" then "raw" else "processed" end)} and
                (keys_unsorted | last) == "sampler")' "out-$kind.jsonl"
        # 2 ends a turn (stop, kept); 3 tokens without it is length
        jq -e -s 'all(.[]; (.completion_tokens[-1] == 2 and .finish_reason == "stop") or
            ((.completion_tokens | length) == 3 and .finish_reason == "length"))' "out-$kind.jsonl"
        # one request a sample, ids in (the prompt's own for b), seeds from (--seed, id, sample)
        [ "$(wc -l < requests.log)" -eq 4 ]
        grep -q '\[1,10,11,12,2,1,4,5\]' requests.log
        teardown
        SERVER_PID=
        mv requests.log "requests-$kind.log"
    done
    # the same seeds whatever the kind: the records agree token for token
    [ "$(jq -c .completion_tokens out-vllm.jsonl)" = "$(jq -c .completion_tokens out-llamacpp.jsonl)" ]
    [ "$(jq -c .completion_tokens out-sglang.jsonl)" = "$(jq -c .completion_tokens out-llamacpp.jsonl)" ]
    # samples of one prompt get different seeds
    [ "$(jq -s '.[0].completion_tokens != .[1].completion_tokens' out-vllm.jsonl)" = true ]
}

@test "the server down: 69 in one line naming the URL, nothing written" {
    fake vllm
    teardown # nothing listens on that port now
    run --separate-stderr rollout --out out.jsonl
    [ "$status" -eq 69 ]
    [ "$(printf '%s\n' "$stderr" | wc -l)" -eq 1 ]
    [[ "$stderr" == *"server: cannot connect to $URL/v1/models"* ]]
    [ ! -e out.jsonl ]
}

@test "429 then an answer: retried after Retry-After, records written" {
    fake llamacpp --fault 429 --times 2
    run --separate-stderr rollout --out out.jsonl --progress
    [ "$status" -eq 0 ]
    [ "$(wc -l < out.jsonl)" -eq 4 ]
    [ "$(curl -s "$URL/stats" | jq -cS .by_status)" = '{"200":4,"429":2}' ]
    [[ "$stderr" == *"7 requests (2 retries)"* ]] # the probe of /v1/models, 4 samples, 2 retries
}

@test "429 on every attempt: 75 after --server-retries, naming the record, nothing written" {
    fake sglang --fault 429 --times 0
    run --separate-stderr rollout --out out.jsonl --server-retries 1
    [ "$status" -eq 75 ]
    [[ "$stderr" == *"prompts.jsonl:"*": record \""*"\", sample "*": server: no answer after 2 attempts (last: HTTP 429: slow down); rerun later"* ]]
    [ ! -e out.jsonl ]
}

@test "a reply with one log-probability too few, or none: 65 naming the record, nothing written" {
    local kind fault
    for kind in vllm sglang llamacpp; do
        for fault in count nologprobs; do
            # llama.cpp's is taken for a split UTF-8 character and asked again: every time here
            fake "$kind" --fault "$fault" $([ "$kind$fault" = llamacppcount ] && echo --times 0)
            run --separate-stderr rollout --out out.jsonl
            [ "$status" -eq 65 ] || { echo "$kind $fault: $status $stderr"; false; }
            [[ "$stderr" == *"prompts.jsonl:"*": record \""*"\", sample "*": the $kind server's reply: "* ]]
            if [ "$kind$fault" = llamacppcount ]; then
                [[ "$stderr" == *" tokens (llama.cpp's server gives none for a token that ends inside a UTF-8 character), with each of its seeds"* ]]
                [ "$(curl -s "$URL/stats" | jq .generate)" -ge 5 ]
            elif [ "$fault" = count ]; then
                [[ "$stderr" == *"log-probabilities for "*" tokens"* ]]
            else
                [[ "$stderr" == *"no log-probabilities"* ]]
            fi
            [ ! -e out.jsonl ]
            teardown
            SERVER_PID=
        done
    done
}

@test "llama.cpp without the probability of a token (a split UTF-8 character): asked again with the next seed" {
    fake llamacpp --fault count --times 1
    run --separate-stderr rollout --out out.jsonl
    [ "$status" -eq 0 ]
    [ "$(wc -l < out.jsonl)" -eq 4 ]
    [ "$(curl -s "$URL/stats" | jq .generate)" -eq 5 ]
    # the sample asked again has its next seed (the first token is 3 + seed mod 90): another token
    # than the same sample gets from a server that gave every probability at once
    mv out.jsonl redrawn.jsonl
    teardown
    fake llamacpp
    run --separate-stderr rollout --out out.jsonl
    [ "$status" -eq 0 ]
    ! cmp -s <(jq -c .completion_tokens redrawn.jsonl) <(jq -c .completion_tokens out.jsonl)
    jq -s -e 'all(.[]; (.completion_tokens | length) == (.logprobs | length))' redrawn.jsonl
}

@test "a reply that is not JSON is retried; a token the tokenizer lacks is 65 naming the model" {
    fake vllm --fault notjson
    run --separate-stderr rollout --out out.jsonl
    [ "$status" -eq 0 ]
    [ "$(curl -s "$URL/stats" | jq .generate)" -eq 5 ]
    teardown
    fake vllm --fault foreign
    run --separate-stderr rollout --out out2.jsonl
    [ "$status" -eq 65 ]
    [[ "$stderr" == *"the server sent token 500, beyond the 97 of --model $TOK's tokenizer"* ]]
}

@test "usage: --server flags need --server; our engine's flags are refused with it; an unknown API is 69" {
    run --separate-stderr grpo-rollout --model "$TOK" --server-kind vllm --in prompts.jsonl
    [ "$status" -eq 64 ]
    [[ "$stderr" == *"--server-kind needs --server URL"* ]]
    run --separate-stderr grpo-rollout --model "$TOK" --server http://127.0.0.1:9 --weights f32 --in prompts.jsonl
    [ "$status" -eq 64 ]
    fake vllm
    # a trailing /v1 is the same server
    run --separate-stderr rollout --out out.jsonl
    [ "$status" -eq 0 ]
    URL=$URL/v1/ run --separate-stderr rollout --out out2.jsonl
    [ "$status" -eq 0 ]
    cmp out.jsonl out2.jsonl
    run --separate-stderr rollout --server-model other --out out3.jsonl
    [ "$status" -eq 69 ]
    [[ "$stderr" == *"GET /v1/models: the server lists no model \"other\""* ]]
}

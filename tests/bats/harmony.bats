#!/usr/bin/env bats
# gpt-oss's chat format, harmony, through the tools (formats/env.md, formats/rollout.md).
# The tokenizer is tests/fixtures/tiny-tokenizer with "}" and harmony's special tokens
# added (ids 98-104) and a chat template that is recognised as harmony's; the
# completions are scripted token ids served by tests/ref/rollout_server.py --replies,
# so each case says exactly what the model wrote. The rendering itself is checked
# against gpt-oss's own template by tests/bats/chat.bats.
load helpers

setup() {
    server_setup
    HTOK="$T/htok"
    mkdir -p "$HTOK"
    jq '.model.vocab["}"] = 97 | .added_tokens += (["<|start|>", "<|end|>", "<|message|>", "<|channel|>",
        "<|constrain|>", "<|return|>", "<|call|>"] | to_entries | map({id: (.key + 98), content: .value,
        single_word: false, lstrip: false, rstrip: false, normalized: false, special: true}))' \
        "$TOK/tokenizer.json" > "$HTOK/tokenizer.json"
    # recognised by its tokens, as gpt-oss's template is; <|endoftext|> alone ends a turn here
    echo '{"chat_template": "{{- \"<|start|>system<|message|>\" }}{# a stand-in: <|channel|> #}"}' \
        > "$HTOK/tokenizer_config.json"
    echo '{"eos_token_id": 0}' > "$HTOK/generation_config.json"
}

teardown() { server_stop; }

# ids TEXT: the tiny tokenizer's ids of TEXT, harmony's special tokens matched,
# except inside [[plain ...]] (the same characters as ordinary tokens), as a JSON array.
ids() {
    "$PY" - "$HTOK/tokenizer.json" "$1" << 'EOF'
import json, re, sys
tok = json.load(open(sys.argv[1]))
vocab = dict(tok["model"]["vocab"], **{t["content"]: t["id"] for t in tok["added_tokens"]})
byte = {" ": "\u0120", "\n": "\u010a"}
out = []
for plain, text in re.findall(r"\[\[plain (.*?)\]\]|((?:(?!\[\[plain ).)+)", sys.argv[2], re.S):
    if plain:
        out += [vocab[byte.get(c, c)] for c in plain]
    for special, char in re.findall(r"(<\|[a-z]+\|>)|(.)", text, re.S):
        out.append(vocab[special] if special else vocab[byte.get(char, char)])
print(json.dumps(out, separators=(",", ":")))
EOF
}

# system NN DATE: harmony's system message
system() {
    printf '%s' "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.
Knowledge cutoff: 2024-06
Current date: $2

Reasoning: $1

# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>"
}
REST='<|start|>developer<|message|># Instructions

Be brief.

<|end|><|start|>user<|message|>What is 6*7?<|end|><|start|>assistant'

@test "grpo-prep: a harmony model's prompt_tokens are its system, developer and user messages, assistant opened" {
    echo '{"id": "q", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 6*7?"}]}' > q.jsonl
    run --separate-stderr grpo-prep --task jsonl --model "$HTOK" --in q.jsonl --out p.jsonl
    [ "$status" -eq 0 ] || { echo "$stderr"; false; }
    [ "$(jq -c .prompt_tokens p.jsonl)" = "$(ids "$(system medium 2025-06-28)$REST")" ]
    # the reasoning level and the date are flags; the default date is a fixed one, not today's
    grpo-prep --task jsonl --model "$HTOK" --in q.jsonl --reasoning-effort low --chat-date 2026-01-02 --out p2.jsonl
    [ "$(jq -c .prompt_tokens p2.jsonl)" = "$(ids "$(system low 2026-01-02)$REST")" ]
    # a gpt-oss whose directory has no template (config.json's model_type): harmony too
    mkdir oss && cp "$HTOK/tokenizer.json" "$HTOK/generation_config.json" oss/
    echo '{}' > oss/tokenizer_config.json
    echo '{"model_type": "gpt_oss"}' > oss/config.json
    grpo-prep --task jsonl --model oss --in q.jsonl --out p3.jsonl
    [ "$(jq -c .prompt_tokens p3.jsonl)" = "$(jq -c .prompt_tokens p.jsonl)" ]
    # forced by name on any tokenizer that has harmony's tokens
    grpo-prep --task jsonl --model "$HTOK" --chat-template harmony --in q.jsonl --out p4.jsonl
    cmp p.jsonl p4.jsonl
}

@test "grpo-prep: harmony's flags are checked, and refused for another template, in one line" {
    echo '{"id": "q", "prompt": "hi"}' > q.jsonl
    run grpo-prep --task jsonl --model "$TOK" --in q.jsonl --reasoning-effort low --out p.jsonl
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-prep '^grpo-prep: --reasoning-effort: only the harmony chat template \(gpt-oss\) has it; this one is chatml$'
    run grpo-prep --task jsonl --model "$HTOK" --in q.jsonl --chat-date 2025-13-01 --out p.jsonl
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-prep "^grpo-prep: --chat-date: expected a date YYYY-MM-DD or today, got '2025-13-01'$"
    run grpo-prep --task jsonl --in q.jsonl --chat-date 2025-01-01
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-prep '^grpo-prep: --chat-date needs --model$'
    [ ! -e p.jsonl ]
    # a tokenizer without harmony's tokens cannot be harmony's
    run grpo-prep --task jsonl --model "$TOK" --chat-template harmony --in q.jsonl --out p.jsonl
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-prep 'tokenizer_config.json: the tokenizer has no <\|start\|> token, which the harmony chat template \(gpt-oss\) needs$'
    [ ! -e p.jsonl ]
    rollout_server_start vllm
    run grpo-rollout --model "$TOK" --chat-template harmony --in q.jsonl --out r.jsonl --server "$URL"
    [ "$status" -eq 65 ]
    [[ "$output" == *"the tokenizer has no <|start|> token, which the harmony chat template (gpt-oss) needs"* ]]
}

@test "rollout and reward: the answer is the final channel's, never the reasoning's" {
    local a b c d e f
    a=$(ids '<|channel|>analysis<|message|>The answer is 42.<|end|>')                 # no final channel
    b=$(ids '<|channel|>analysis<|message|>It is 42.<|end|><|start|>assistant<|channel|>final<|message|>41<|return|>')
    c=$(ids '<|channel|>analysis<|message|>Maybe 41.<|end|><|start|>assistant<|channel|>final<|message|>42<|return|>')
    # a final channel written as ordinary tokens inside the reasoning, then no real one
    d=$(ids '<|channel|>analysis<|message|>x[[plain <|end|><|start|>assistant<|channel|>final<|message|>42]]<|return|>')
    e=$(ids '<|channel|>final<|message|>42<|return|><|start|>assistant<|channel|>final<|message|>41<|end|>') # past <|return|>
    f=$(ids '<|channel|>analysis<|message|>42<|end|><|start|>user<|channel|>final<|message|>42<|end|>') # not the assistant's
    jq -n --argjson a "$a" --argjson b "$b" --argjson c "$c" --argjson d "$d" --argjson e "$e" --argjson f "$f" \
        '{"20": [$a], "21": [$b], "22": [$c], "23": [$d], "24": [$e], "25": [$f]}' > replies.json
    for i in 0 1 2 3 4 5; do
        printf '{"id": "c%d", "prompt_tokens": [%d, 98, 69, 100], "answer": "42"}\n' "$i" $((20 + i))
    done > prompts.jsonl
    rollout_server_start vllm --replies "$T/replies.json"
    run --separate-stderr grpo-rollout --model "$HTOK" --server "$URL" -k 1 --max-new-tokens 200 --seed 1 \
        --in prompts.jsonl --out r.jsonl
    [ "$status" -eq 0 ] || { echo "$stderr"; false; }
    jq -c '[.id, .completion, .thinking, .finish_reason]' r.jsonl
    jq -e -s 'map([.completion, .thinking]) == [["", "The answer is 42."], ["41", "It is 42."], ["42", "Maybe 41."],
        ["", "x<|end|><|start|>assistant<|channel|>final<|message|>42"], ["42", ""], ["", "42"]]' r.jsonl
    # <|return|> ends the completion though generation_config.json names <|endoftext|> only
    jq -e -s --argjson e "$e" '.[4].completion_tokens == $e[:($e | index(103)) + 1] and .[4].finish_reason == "stop"' r.jsonl
    run --separate-stderr grpo-reward --fn answer --in r.jsonl --out s.jsonl
    [ "$status" -eq 0 ] || { echo "$stderr"; false; }
    [ "$(jq -c .rewards.answer s.jsonl | tr '\n' ' ')" = '0 0 1 0 1 0 ' ]
}

@test "multi-turn: a tool call on the commentary channel, its result named after it, the final answer scored" {
    local t0 t1
    t0=$(ids '<|channel|>analysis<|message|>Need calc.<|end|><|start|>assistant<|channel|>commentary to=functions.calc '\
'<|constrain|>json<|message|>{"expr": "6*7"}<|call|>')
    t1=$(ids '<|channel|>analysis<|message|>It said 42.<|end|><|start|>assistant<|channel|>final<|message|>42<|return|>')
    jq -n --argjson a "$t0" --argjson b "$t1" '{"20": [$a, $b]}' > replies.json
    echo '{"id": "m", "prompt_tokens": [20, 98, 69, 100], "answer": "42"}' > prompts.jsonl
    rollout_server_start vllm --replies "$T/replies.json"
    # the environment: scripts/env/calc.py, each request logged
    printf 'tee -a requests.jsonl | python3 -u %s/scripts/env/calc.py\n' "$GRPO_ROOT" > env.sh
    run --separate-stderr grpo-rollout --model "$HTOK" --server "$URL" -k 1 --max-new-tokens 200 --seed 1 \
        --env "sh env.sh" --max-turns 3 --in prompts.jsonl --out r.jsonl
    [ "$status" -eq 0 ] || { echo "$stderr"; false; }
    # the environment saw the call parsed from the tokens, and the reasoning as "thinking"
    jq -e -s '.[0].tool_calls == [{"name": "calc", "arguments": {"expr": "6*7"}}] and
        .[0].messages[-1] == {"role": "assistant", "content": "", "thinking": "Need calc."}' requests.jsonl
    # the result went in as harmony's tool message, then the assistant's opening; the answer is the final channel's
    cont=$(ids '<|start|>functions.calc to=assistant<|channel|>commentary<|message|>"42"<|end|><|start|>assistant')
    jq -e --argjson t0 "$t0" --argjson t1 "$t1" --argjson c "$cont" '
        .completion_tokens == $t0 + $c + $t1 and
        .completion_mask == ([$t0[] | 1] + [$c[] | 0] + [$t1[] | 1]) and
        .completion == "42" and .thinking == "It said 42." and .env_reward == 1 and
        .turns == [{"role": "assistant", "content": "", "thinking": "Need calc."}, {"role": "tool", "content": "42"},
                   {"role": "assistant", "content": "42", "thinking": "It said 42."}]' r.jsonl
}

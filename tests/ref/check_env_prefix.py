#!/usr/bin/env python3
"""The prefix property of multi-turn rollout records (formats/rollout.md):
prompt_tokens + completion_tokens equal the Hugging Face tokenizer's ids of
the model's own chat template applied to the whole conversation (prompt
messages, then turns), up to the end marker of the last assistant turn.

Usage:
  check_env_prefix.py make chatml|llama3 DIR
      a tiny random llama (model_ref.py's, vocabulary and context widened) with
      a byte-level tokenizer of printable ASCII and newline plus the family's
      special tokens, and the family's template with tools: Qwen2.5's ChatML
      or Llama 3.1's. Needs the test venv (torch, tokenizers).
  check_env_prefix.py check DIR ROLLOUTS [TOOLS]
      transformers' apply_chat_template (the .venv-peft venv) against every
      record. A record whose assistant text cannot round-trip (the random
      model sampled a special token inside a turn, or, for Llama 3, white
      space its template trims) is counted as not comparable, not compared.
      Prints TAP and "compared N" at the end.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SPECIALS = {
    "chatml": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
               "<|eom_id|>", "<|python_tag|>"],
}
EOS = {"chatml": ["<|im_end|>"], "llama3": ["<|eot_id|>", "<|end_of_text|>"]}
# the closing text HF renders after an assistant message's content
CLOSE = {"chatml": "<|im_end|>\n", "llama3": "<|eot_id|>"}

QWEN25 = (
    "{%- if tools %}\n    {{- '<|im_start|>system\\n' }}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\\n<tools>\" }}\n"
    "    {%- for tool in tools %}\n        {{- \"\\n\" }}\n        {{- tool | tojson }}\n    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\": <function-name>, \\\"arguments\\\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n\" }}\n"
    "{%- else %}\n    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\\n' }}\n    {%- endif %}\n{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or "
    "(message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n        {{- message.content }}\n        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n        {%- endif %}\n    {%- endif %}\n{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n"
)

LLAMA31 = (
    "{{- bos_token }}\n{%- if not tools_in_user_message is defined %}\n    {%- set tools_in_user_message = true %}\n"
    "{%- endif %}\n{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n"
    "{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n"
    "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n"
    "    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n"
    "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
    "{%- if tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n{%- endif %}\n"
    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
    "{{- system_message }}\n{{- \"<|eot_id|>\" }}\n"
    "{%- if tools_in_user_message and not tools is none %}\n"
    "    {%- set first_user_message = messages[0]['content']|trim %}\n    {%- set messages = messages[1:] %}\n"
    "    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n"
    "    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n"
    "    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n"
    "    {{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and its "
    "value}.' }}\n    {{- \"Do not use variables.\\n\\n\" }}\n"
    "    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n"
    "    {{- first_user_message + \"<|eot_id|>\"}}\n{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if not (message.role == 'ipython' or message.role == 'tool') %}\n"
    "        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
    "'<|eot_id|>' }}\n"
    "    {%- else %}\n        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n"
    "        {%- if message.content is mapping or message.content is iterable %}\n"
    "            {{- message.content | tojson }}\n        {%- else %}\n            {{- message.content }}\n"
    "        {%- endif %}\n        {{- \"<|eot_id|>\" }}\n    {%- endif %}\n{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n"
)


def make(family, out):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    import model_ref
    from make_tiny_tokenizer import byte_to_unicode
    b2u = byte_to_unicode()
    specials = SPECIALS[family]
    symbols = [b2u[b] for b in [0x0A] + list(range(0x20, 0x7F))]
    vocab = {t: i for i, t in enumerate(specials + symbols)}
    model_ref.TINY["vocab_size"] = len(vocab)
    model_ref.TINY["max_position_embeddings"] = 2048
    model_ref.make_tiny("llama", out)
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tk.save(os.path.join(out, "tokenizer.json"))
    eos = [vocab[s] for s in EOS[family]]
    cfg = {"chat_template": QWEN25 if family == "chatml" else LLAMA31, "bos_token": specials[0] if family == "llama3"
           else None, "eos_token": EOS[family][0], "tokenizer_class": "PreTrainedTokenizerFast"}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": vocab[specials[0]] if family == "llama3" else None, "eos_token_id": eos}, f)


def check(model_dir, rollouts, tools_path):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(model_dir)
    family = "llama3" if "<|eot_id|>" in tok.get_vocab() else "chatml"
    tools = json.load(open(tools_path)) if tools_path else None
    special_ids = set(tok.all_special_ids) | {tok.convert_tokens_to_ids(s) for s in SPECIALS[family]}
    # the end-of-turn token the template writes (an other end token closes a turn too, but not as HF renders it)
    eos_ids = {tok.convert_tokens_to_ids(EOS[family][0])}
    with open(rollouts) as f:
        records = [json.loads(line) for line in f]
    bad = compared = skipped = 0
    for n, rec in enumerate(records, 1):
        name = f"{rec['id']}/{rec['sample']}"
        ours = rec["prompt_tokens"] + rec["completion_tokens"]
        mask = rec["completion_mask"]
        # the sampled tokens of each turn, without the end token that closed it
        sampled_specials = [t for t, m in zip(rec["completion_tokens"], mask) if m and t in special_ids]
        assistant = [m["content"] for m in rec["turns"] if m["role"] == "assistant"]
        trims = family == "llama3" and any(a != a.strip() for a in assistant)
        if any(t not in eos_ids for t in sampled_specials) or trims:
            skipped += 1
            print(f"ok {n} - {name}: not comparable (the random model sampled a special token or white space "
                  f"its template trims)")
            continue
        conversation = rec["messages"] + rec["turns"]
        hf = tok.apply_chat_template(conversation, tools=tools, tokenize=True)
        closed = rec["completion_tokens"][-1] in eos_ids
        rest = tok.decode(hf[len(ours):]) if hf[:len(ours)] == ours else None
        want_rest = ("\n" if family == "chatml" else "") if closed else CLOSE[family]
        if rest != want_rest:
            bad += 1
            first = next((i for i, (a, b) in enumerate(zip(ours, hf)) if a != b), min(len(ours), len(hf)))
            print(f"not ok {n} - {name}: first difference at token {first} of {len(ours)} (HF {len(hf)})\n"
                  f"#   ours: {tok.decode(ours[max(0, first - 20):first + 20])!r}\n"
                  f"#   hf:   {tok.decode(hf[max(0, first - 20):first + 20])!r}")
        else:
            compared += 1
            print(f"ok {n} - {name}: {len(ours)} tokens, {len(rec['turns'])} turns")
    print(f"1..{len(records)}")
    print(f"# compared {compared}, not comparable {skipped}")
    return 1 if bad or not records else 0


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "check":
        return check(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    print(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main())

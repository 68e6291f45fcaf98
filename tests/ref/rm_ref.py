#!/usr/bin/env python3
"""Independent PyTorch reference for grpo-reward's `rm` function.

Usage: .venv/bin/python tests/ref/rm_ref.py COMMAND ...

  make ARCH OUTDIR [--labels N] [--label-key id2label|num_labels|none] [--pad ID] [--seed S]
      A tiny random Hugging Face sequence classifier (ARCH = llama | qwen2 |
      qwen3 -> LlamaForSequenceClassification, ...): model_ref.py's tiny
      decoder without lm_head, plus score.weight [N, hidden] (default N 1);
      config.json says N through id2label, num_labels or not at all
      (--label-key), and pad_token_id when --pad is given. The tokenizer
      directory files come from make_tiny_tokenizer.py (97 byte-level tokens,
      a ChatML template with the default system message "Be brief.").
  score DIR RECORDS OUT
      The reference reward of every record of RECORDS (JSONL), one per line
      (repr of a float64) into OUT: the record's messages plus
      {"role": "assistant", "content": completion} (null or absent: ""), or
      plus its `turns` when it has them (a multi-turn record)
      rendered by Jinja from tokenizer_config.json's chat_template as
      transformers' apply_chat_template does (trim_blocks, lstrip_blocks, no
      generation prompt), encoded by HF `tokenizers` without added special
      tokens, run through the float64 forward of model_ref.py with the score
      head in place of the LM head, read at transformers' index: the last
      token when config.json has no pad_token_id, else the rightmost token
      that is not pad (argmax of position * (id != pad)).
  compare SCORED REF TOL
      rewards.rm of every record of SCORED (grpo-reward's output, or one
      number per line) against REF; prints the max abs and rel error and exits 1 when the abs error
      exceeds TOL.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_ref  # noqa: E402

CLASSES = {"llama": "LlamaForSequenceClassification", "qwen2": "Qwen2ForSequenceClassification",
           "qwen3": "Qwen3ForSequenceClassification"}


def make(arch, out, labels=1, label_key="id2label", pad=None, seed=4321):
    import torch
    from safetensors.torch import load_file, save_file
    model_ref.make_tiny(arch, out, seed=seed)
    path = os.path.join(out, "model.safetensors")
    t = load_file(path)
    del t["lm_head.weight"]
    hidden = t["model.norm.weight"].shape[0]
    g = torch.Generator().manual_seed(seed + 1)
    t["score.weight"] = (torch.randn(labels, hidden, generator=g) / hidden ** 0.5).contiguous()
    save_file(t, path, metadata={"format": "pt"})
    cfg_path = os.path.join(out, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["architectures"] = [CLASSES[arch]]
    if label_key == "id2label":
        cfg["id2label"] = {str(i): f"LABEL_{i}" for i in range(labels)}
        cfg["label2id"] = {f"LABEL_{i}": i for i in range(labels)}
    elif label_key == "num_labels":
        cfg["num_labels"] = labels
    if pad is not None:
        cfg["pad_token_id"] = pad
    with open(cfg_path, "w") as f:
        json.dump(cfg, f, indent=2)
    os.remove(os.path.join(out, "tokens.txt"))
    subprocess.run([sys.executable, os.path.join(HERE, "make_tiny_tokenizer.py"), out], check=True)


def render(template, messages, tok_cfg):
    import jinja2
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=False,
                                            bos_token=tok_cfg.get("bos_token", ""),
                                            eos_token=tok_cfg.get("eos_token", ""))


def score(d, records_path, out_path):
    import torch
    from safetensors.torch import load_file
    from tokenizers import Tokenizer
    cfg = json.load(open(os.path.join(d, "config.json")))
    tok_cfg = json.load(open(os.path.join(d, "tokenizer_config.json")))
    tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    W = {k: v.to(torch.float64) for k, v in load_file(os.path.join(d, "model.safetensors")).items()}
    W["lm_head.weight"] = W["score.weight"]  # the forward's last product is the score head
    nh = cfg["num_attention_heads"]
    c = dict(L=cfg["num_hidden_layers"], nh=nh, nkv=cfg.get("num_key_value_heads", nh),
             hd=cfg.get("head_dim", cfg["hidden_size"] // nh), eps=cfg["rms_norm_eps"],
             theta=cfg["rope_theta"], rope_scaling=cfg.get("rope_scaling"),
             qk_norm=cfg["model_type"] == "qwen3")
    pad = cfg.get("pad_token_id")
    values = []
    with open(records_path) as f:
        for line in f:
            rec = json.loads(line)
            completion = rec.get("completion") or ""
            if isinstance(rec.get("turns"), list):
                conv = rec["messages"] + rec["turns"]
            else:
                conv = rec["messages"] + [{"role": "assistant", "content": completion}]
            ids = tk.encode(render(tok_cfg["chat_template"], conv, tok_cfg), add_special_tokens=False).ids
            with torch.no_grad():
                logits = model_ref.forward(c, W, ids)  # [T, num_labels]
            if pad is None:
                at = len(ids) - 1
            else:
                mask = torch.tensor([int(i != pad) for i in ids])
                at = int((torch.arange(len(ids)) * mask).argmax())
            values.append(float(logits[at, 0]))
    with open(out_path, "w") as f:
        for v in values:
            f.write(repr(v) + "\n")


def compare(scored, ref, tol):
    with open(scored) as f:  # grpo-reward's records, or one number per line
        ours = [v["rewards"]["rm"] if isinstance(v, dict) else float(v) for v in map(json.loads, f)]
    with open(ref) as f:
        want = [float(line) for line in f]
    if len(ours) != len(want):
        print(f"{len(ours)} scored records, {len(want)} reference values")
        return 1
    abs_err = max(abs(a - b) for a, b in zip(ours, want))
    rel_err = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, want))
    spread = max(want) - min(want)
    print(f"max abs err {abs_err:.3g}, max rel err {rel_err:.3g} (tol {tol:g}; {len(want)} values, "
          f"range {min(want):.4g} .. {max(want):.4g}, spread {spread:.3g})")
    return 0 if abs_err <= tol else 1


def make_cmd(args):
    opts = {}
    for flag, key, conv in (("--labels", "labels", int), ("--label-key", "label_key", str),
                            ("--pad", "pad", int), ("--seed", "seed", int)):
        if flag in args:
            opts[key] = conv(args[args.index(flag) + 1])
    make(args[0], args[1], **opts)


COMMANDS = {
    "make": make_cmd,
    "score": lambda a: score(a[0], a[1], a[2]),
    "compare": lambda a: compare(a[0], a[1], float(a[2])),
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(__doc__)
    sys.exit(COMMANDS[sys.argv[1]](sys.argv[2:]) or 0)

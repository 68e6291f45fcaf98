#!/usr/bin/env python3
"""Independent checks of what grpo-export writes (tests/bats/export.bats).

Usage: .venv/bin/python tests/ref/check_export.py COMMAND ...

  tokenizer WORKDIR
      tokenizer.json / tokenizer_config.json / generation_config.json built
      from GGUF metadata (test_hf_dir --text-files): the real SmolLM2 GGUF
      (pre-tokenizer "smollm"), and tokenizer-only GGUFs made here from its
      vocab with the "gpt-2" (plus user-defined added tokens), "llama-bpe"
      (add_bos_token: a TemplateProcessing post-processor), "qwen2" and
      "gpt-4o" (o200k) pre-tokenizers. For each: Hugging Face `tokenizers` loading the
      exported tokenizer.json gives the ids our tokenizer gives from the
      GGUF and from the exported directory (tok_load_json), on the
      check_tokenizer.py corpus, with special tokens matched and not; the
      pre_tokenizer equals what `tokenizers` itself serializes for that
      family; chat template, bos/eos and generation ids are the GGUF's.
  hf-dir OUT SRC DTYPE
      OUT exported from the Hugging Face directory SRC: model.safetensors
      has SRC's tensor names, shapes and the dtype (F32/F16/BF16), values
      equal to SRC's rounded to that dtype; metadata {"format": "pt"};
      config.json is SRC's byte for byte except torch_dtype; the text files
      are SRC's byte for byte (generation_config.json made from config.json
      when SRC has none).
  gguf-dir OUT GGUF DTYPE
      OUT exported from a GGUF: every tensor under its HF name and shape,
      values equal to gguf-py's dequantization (Q/K rows un-permuted here)
      rounded to DTYPE; config.json's hyper-parameters are the GGUF's.
  peft OUT BASE
      OUT is a PEFT adapter directory for the HF model BASE: exactly
      adapter_model.safetensors and adapter_config.json; PEFT tensor names
      and shapes for BASE's config (on gpt-oss's stacked experts, named by
      target_parameters, its ParamWrapper factors lora_A [r E, in] and
      lora_B [out, r E]); adapter_config.json is what
      json.dumps(indent=2, sort_keys=True) of its content gives, with PEFT's
      keys and values; loaded by peft.LoraConfig when peft is installed.
  merged-logits BASE ADAPTER TOKENS OUT
      float64 reference logits of BASE with ADAPTER merged (W + alpha/r B A,
      computed here from the files), written like model_ref.py logits.
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import model_ref  # noqa: E402
from model_ref import gguf_hf_weights  # noqa: E402
from tap import done, tap  # noqa: E402
ROOT = os.environ.get("GRPO_ROOT") or os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = os.environ.get("GRPO_HF_TEST_BIN") or os.path.join(ROOT, "build", "tests", "test_hf_dir")
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


# ---- tokenizer -----------------------------------------------------------------------------------

def driver(*args):
    p = subprocess.run([BIN, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{BIN} {' '.join(args)}: exit {p.returncode}: {p.stdout}{p.stderr}")


def our_ids(source, texts, key, workdir, tag):
    inp = os.path.join(workdir, f"in-{tag}.jsonl")
    outp = os.path.join(workdir, f"out-{tag}.txt")
    with open(inp, "w") as f:
        for t in texts:
            f.write(json.dumps({key: t}) + "\n")
    driver("--encode", source, inp, outp)
    with open(outp) as f:
        return [[int(x) for x in line.split()] for line in f.read().split("\n")[:len(texts)]]


def tokenizer_gguf(path, pre, tokens, merges, types, template, add_bos=False, extra_user=()):
    from gguf import GGUFWriter
    tokens, types = list(tokens) + list(extra_user), list(types) + [4] * len(extra_user)
    w = GGUFWriter(path, "llama")
    w.add_context_length(4096)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_eot_token_id(0)
    w.add_add_bos_token(add_bos)
    w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def family_pre(pre):
    """What `tokenizers` itself serializes for the family's pre-tokenizer."""
    from check_tokenizer import LLAMA3_RE, O200K_RE, QWEN2_RE
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers as pt
    def bl(add_prefix_space, trim_offsets, use_regex):  # the constructor ignores trim_offsets
        b = pt.ByteLevel(add_prefix_space=add_prefix_space, use_regex=use_regex)
        b.trim_offsets = trim_offsets
        return b

    p = {"smollm": pt.Sequence([pt.Digits(individual_digits=True),
                                bl(add_prefix_space=False, trim_offsets=True, use_regex=True)]),
         "gpt-2": bl(add_prefix_space=False, trim_offsets=True, use_regex=True),
         "llama-bpe": pt.Sequence([pt.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
                                   bl(add_prefix_space=False, trim_offsets=True, use_regex=False)]),
         "qwen2": pt.Sequence([pt.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
                               bl(add_prefix_space=False, trim_offsets=False, use_regex=False)]),
         "gpt-4o": pt.Sequence([pt.Split(Regex(O200K_RE), behavior="isolated", invert=False),
                                bl(add_prefix_space=False, trim_offsets=True, use_regex=False)])}[pre]
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = p
    return json.loads(tk.to_str())["pre_tokenizer"]


def check_tokenizer(workdir):
    from check_tokenizer import corpus, read_gguf
    from gguf import GGUFReader
    from tokenizers import Tokenizer
    if not os.path.exists(MODEL):
        print(f"1..0 # SKIP no model at {MODEL}")
        return 0
    os.makedirs(workdir, exist_ok=True)
    tokens, merges, types = read_gguf(MODEL)
    f = GGUFReader(MODEL).fields["tokenizer.chat_template"]
    template = bytes(f.parts[f.data[0]]).decode()
    variants = [("smollm", MODEL, False)]
    for pre, add_bos in (("gpt-2", False), ("llama-bpe", True), ("qwen2", False), ("gpt-4o", False)):
        path = os.path.join(workdir, f"tok-{pre}.gguf")
        extra = ("<tool>", "[[x]]") if pre == "gpt-2" else ()
        tokenizer_gguf(path, pre, tokens, merges, types, template, add_bos, extra)
        variants.append((pre, path, add_bos))
    texts = corpus()
    texts += ["<tool> call <tool>  [[x]]y [[x]]", "x<tool>y"]
    for pre, gguf_path, add_bos in variants:
        out = os.path.join(workdir, f"hf-{pre}")
        driver("--text-files", gguf_path, out)
        tk = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
        hf = [tk.encode(t, add_special_tokens=False).ids for t in texts]
        for src, what in ((gguf_path, "the GGUF"), (out, "the exported tokenizer.json")):
            ours = our_ids(src, texts, "text", workdir, pre + what[4:8])
            bad = [(t, h, o) for t, h, o in zip(texts, hf, ours) if h != o]
            tap(not bad, f"{pre}: HF tokenizers on the export = ours from {what} ({len(texts)} strings)",
                bad and f"text: {json.dumps(bad[0][0])}\nhf:   {bad[0][1]}\nours: {bad[0][2]}")
        short = texts[:400]
        tk.encode_special_tokens = True
        hf_plain = [tk.encode(t, add_special_tokens=False).ids for t in short]
        tk.encode_special_tokens = False
        ours = our_ids(gguf_path, short, "nospecial", workdir, pre + "-plain")
        bad = [(t, h, o) for t, h, o in zip(short, hf_plain, ours) if h != o]
        tap(not bad, f"{pre}: special tokens as text agree too ({len(short)} strings)",
            bad and f"text: {json.dumps(bad[0][0])}\nhf:   {bad[0][1]}\nours: {bad[0][2]}")
        doc = json.load(open(os.path.join(out, "tokenizer.json")))
        want_pre = family_pre(pre)
        tap(doc["pre_tokenizer"] == want_pre and doc["normalizer"] is None
            and doc["decoder"]["type"] == "ByteLevel" and doc["model"]["type"] == "BPE"
            and doc["model"]["ignore_merges"] == (pre == "llama-bpe"),
            f"{pre}: pre_tokenizer is what tokenizers serializes for the family; BPE, ByteLevel decoder",
            f"ours: {json.dumps(doc['pre_tokenizer'])}\nwant: {json.dumps(want_pre)}")
        n_added = sum(1 for t in types if t in (3, 4)) + (2 if pre == "gpt-2" else 0)
        specials = [a for a in doc["added_tokens"] if a["special"]]
        tap(len(doc["added_tokens"]) == n_added and len(specials) == sum(1 for t in types if t == 3)
            and all(not a["normalized"] for a in specials),
            f"{pre}: added tokens: control ones special, user-defined ones plain")
        with_special = tk.encode("Hi", add_special_tokens=True).ids
        plain = tk.encode("Hi", add_special_tokens=False).ids
        tap(with_special == ([1] if add_bos else []) + plain,
            f"{pre}: add_special_tokens {'prepends bos' if add_bos else 'adds nothing'}", f"{with_special} vs {plain}")
        tc = json.load(open(os.path.join(out, "tokenizer_config.json")))
        gc = json.load(open(os.path.join(out, "generation_config.json")))
        ok = (tc.get("chat_template") == template and tc.get("bos_token") == "<|im_start|>"
              and tc.get("eos_token") == "<|im_end|>" and gc.get("bos_token_id") == 1
              and tc["added_tokens_decoder"]["2"]["content"] == "<|im_end|>"
              and gc.get("eos_token_id") == (2 if pre == "smollm" else [2, 0]))
        tap(ok, f"{pre}: tokenizer_config.json (chat template, bos/eos, added tokens) and generation_config.json",
            json.dumps({k: v for k, v in tc.items() if k != "added_tokens_decoder" and k != "chat_template"}) + "\n"
            + json.dumps(gc))
    return done()


# ---- weights -------------------------------------------------------------------------------------

ST_DTYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16"}
TORCH_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def load_st(path):
    """name -> (dtype string, shape, tensor as stored), metadata; read with `safetensors`."""
    import torch
    from safetensors import safe_open
    out = {}
    with safe_open(path, "pt") as f:
        meta = f.metadata()
        for k in f.keys():
            t = f.get_tensor(k)
            dt = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}[t.dtype]
            out[k] = (dt, tuple(t.shape), t)
    return out, meta


def rounded(values, dtype):
    import torch
    tdt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    return values.to(torch.float32).to(tdt).to(torch.float64)


def compare_tensors(got, want, dtype, tol_ulps=0):
    """want: name -> float32/64 values. Equal after rounding to dtype, or within
    tol_ulps units of dtype's last place (relative)."""
    import torch
    eps = {"f32": 2.0 ** -23, "f16": 2.0 ** -10, "bf16": 2.0 ** -7}[dtype]
    names_ok = sorted(got) == sorted(want)
    tap(names_ok, f"tensor names are the source's ({len(want)})",
        not names_ok and f"extra {sorted(set(got) - set(want))[:5]} missing {sorted(set(want) - set(got))[:5]}")
    bad = []
    for k, w in want.items():
        if k not in got:
            continue
        dt, shape, v = got[k]
        if dt != ST_DTYPES[dtype] or shape != tuple(w.shape):
            bad.append(f"{k}: {dt} {shape}, expected {ST_DTYPES[dtype]} {tuple(w.shape)}")
            continue
        r = rounded(w, dtype)
        diff = (v.to(torch.float64) - r).abs()
        lim = tol_ulps * eps * r.abs() + (1e-30 if tol_ulps else 0)
        if bool((diff > lim).any()):
            bad.append(f"{k}: max diff {float(diff.max()):.3g}")
    tap(not bad, f"shapes, dtype {ST_DTYPES[dtype]} and values "
        + ("exact after rounding" if not tol_ulps else f"within {tol_ulps} ulp"), "\n".join(bad[:5]))


def check_hf_dir(out, src, dtype):
    import torch  # noqa: F401
    got, meta = load_st(os.path.join(out, "model.safetensors"))
    want, _ = load_st(os.path.join(src, "model.safetensors"))
    tap(meta == {"format": "pt"}, "metadata is {\"format\": \"pt\"}", meta)
    compare_tensors(got, {k: v[2] for k, v in want.items()}, dtype)
    a, b = (open(os.path.join(d, "config.json"), "rb").read() for d in (out, src))
    ja, jb = json.loads(a), json.loads(b)
    tap(ja.get("torch_dtype") == TORCH_DTYPES[dtype], f"config.json torch_dtype is {TORCH_DTYPES[dtype]}")
    ja.pop("torch_dtype", None), jb.pop("torch_dtype", None)
    same_rest = ja == jb and (b"torch_dtype" in b or len(a) > len(b))
    if b"torch_dtype" in b:  # byte for byte apart from the value
        same_rest = same_rest and a.replace(json.dumps(TORCH_DTYPES[dtype]).encode(), b"") == \
            b.replace(json.dumps(json.loads(b)["torch_dtype"]).encode(), b"")
    tap(same_rest, "config.json is the source's byte for byte apart from torch_dtype")
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        s = os.path.join(src, name)
        if os.path.exists(s):
            tap(open(s, "rb").read() == open(os.path.join(out, name), "rb").read(), f"{name} copied byte for byte")
        elif name == "generation_config.json":
            g = json.load(open(os.path.join(out, name)))
            c = json.loads(b)
            tap(all(g.get(k) == c.get(k) for k in ("bos_token_id", "eos_token_id")),
                "generation_config.json made from config.json's ids")
    return done()


def check_gguf_dir(out, gguf_path, dtype):
    got, meta = load_st(os.path.join(out, "model.safetensors"))
    want, cfg = gguf_hf_weights(gguf_path, np.float32)
    tap(meta == {"format": "pt"}, "metadata is {\"format\": \"pt\"}", meta)
    # gguf-py dequantizes in numpy float32 as our C code does in float32;
    # an fma or evaluation-order difference moves a value by an ulp of
    # float32, which can move the rounding to DTYPE by one of its ulps.
    compare_tensors(got, want, dtype, tol_ulps=0 if dtype == "f32" else 1)
    c = json.load(open(os.path.join(out, "config.json")))
    bad = [k for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                       "num_key_value_heads", "head_dim", "max_position_embeddings", "tie_word_embeddings")
           if c.get(k) != cfg[k]]
    bad += [k for k in ("rope_theta", "rms_norm_eps") if abs(c.get(k, 0) - cfg[k]) > 1e-6 * abs(cfg[k])]
    tap(not bad and c["model_type"] == cfg["arch"] and c["torch_dtype"] == TORCH_DTYPES[dtype]
        and c["hidden_act"] == "silu", "config.json has the GGUF's hyper-parameters", bad)
    return done()


# ---- PEFT ----------------------------------------------------------------------------------------

PEFT_KEYS = {"alpha_pattern": {}, "auto_mapping": None, "bias": "none", "fan_in_fan_out": False,
             "inference_mode": True, "init_lora_weights": True, "layers_pattern": None, "layers_to_transform": None,
             "modules_to_save": None, "peft_type": "LORA", "rank_pattern": {}, "revision": None,
             "task_type": "CAUSAL_LM", "use_dora": False}
MODULES = {"q_proj": "self_attn", "k_proj": "self_attn", "v_proj": "self_attn", "o_proj": "self_attn",
           "gate_proj": "mlp", "up_proj": "mlp", "down_proj": "mlp"}


def check_peft(out, base, dtype="f32"):
    files = sorted(os.listdir(out))
    tap(files == ["adapter_config.json", "adapter_model.safetensors"], "the adapter directory holds PEFT's two files",
        files)
    text = open(os.path.join(out, "adapter_config.json")).read()
    ac = json.loads(text)
    tap(json.dumps(ac, indent=2, sort_keys=True) == text, "adapter_config.json is json.dumps(indent=2, sort_keys=True)")
    bad = {k: ac.get(k) for k, v in PEFT_KEYS.items() if ac.get(k, "absent") != v}
    extra = set(ac) - set(PEFT_KEYS) - {"base_model_name_or_path", "lora_alpha", "lora_dropout", "r",
                                        "target_modules", "use_rslora", "target_parameters"}
    params = ac.get("target_parameters", [])
    tap(not bad and not extra and isinstance(ac["r"], int) and set(ac["target_modules"]) <= set(MODULES)
        and params == model_ref.oss_target_params(params),
        "adapter_config.json has PEFT's LoraConfig keys and values", f"{bad} {extra} {params}")
    cfg = json.load(open(os.path.join(base, "config.json")))
    d, h, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim", d // nh)
    dims = {"q_proj": (d, nh * hd), "k_proj": (d, nkv * hd), "v_proj": (d, nkv * hd), "o_proj": (nh * hd, d),
            "gate_proj": (d, h), "up_proj": (d, h), "down_proj": (h, d)}
    # a layer with experts (qwen3_moe): PEFT's module per expert, of its width
    I = cfg.get("moe_intermediate_size", 0)
    expert_dims = {"gate_proj": (d, I), "up_proj": (d, I), "down_proj": (I, d)}
    want = {}
    for layer in range(L):
        for m in ac["target_modules"]:
            p = f"base_model.model.model.layers.{layer}.{MODULES[m]}"
            mods = [(f"{p}.{m}", dims[m])]
            if MODULES[m] == "mlp" and model_ref.moe_layer(cfg, layer):
                mods = [(f"{p}.experts.{x}.{m}", expert_dims[m]) for x in range(cfg["num_experts"])]
            for name, (i, o) in mods:
                want[name + ".lora_A.weight"] = (ac["r"], i)
                want[name + ".lora_B.weight"] = (o, ac["r"])
        # gpt-oss's stacked experts (target_parameters): PEFT's ParamWrapper factors
        E, r = cfg.get("num_local_experts", 0), ac["r"]
        stacked = {"mlp.experts.gate_up_proj": (d, 2 * h), "mlp.experts.down_proj": (h, d)}
        for p, (a, b) in model_ref.param_wrapper_names(layer, params).items():
            want[a], want[b] = (r * E, stacked[p][0]), (stacked[p][1], r * E)
    got, meta = load_st(os.path.join(out, "adapter_model.safetensors"))
    bad = [k for k in want if k not in got or got[k][1] != want[k] or got[k][0] != ST_DTYPES[dtype]]
    tap(meta == {"format": "pt"} and sorted(got) == sorted(want) and not bad,
        f"PEFT tensor names, shapes [r, in] / [out, r] and dtype {ST_DTYPES[dtype]} ({len(want)} tensors)",
        f"{bad[:3]} extra {sorted(set(got) - set(want))[:3]}")
    nonzero = all(float(v[2].abs().max()) > 0 for v in got.values())
    tap(nonzero, "every factor is non-zero")
    try:
        import peft
    except ImportError:
        tap(True, "peft.LoraConfig reads it # SKIP peft is not installed")
        return done()
    lc = peft.LoraConfig.from_pretrained(out)
    tap(lc.r == ac["r"] and set(lc.target_modules) == set(ac["target_modules"])
        and list(getattr(lc, "target_parameters", None) or []) == params, "peft.LoraConfig reads it")
    return done()


def merged_logits(base, adapter, tokens_path, out):
    import torch
    from model_ref import forward, merge_adapter, read_tokens, write_f64
    from safetensors.torch import load_file
    cfg = json.load(open(os.path.join(base, "config.json")))
    W = {k: v.to(torch.float64) for k, v in load_file(os.path.join(base, "model.safetensors")).items()}
    W = merge_adapter(W, adapter)
    if cfg.get("tie_word_embeddings", False):
        W["lm_head.weight"] = W["model.embed_tokens.weight"]
    nh = cfg["num_attention_heads"]
    c = dict(L=cfg["num_hidden_layers"], nh=nh, nkv=cfg.get("num_key_value_heads", nh),
             hd=cfg.get("head_dim", cfg["hidden_size"] // nh), eps=cfg["rms_norm_eps"], theta=cfg["rope_theta"],
             rope_scaling=cfg.get("rope_scaling"), qk_norm=cfg["model_type"] == "qwen3")
    with torch.no_grad():
        write_f64(out, forward(c, W, read_tokens(tokens_path)))
    return 0


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 64
    cmd, a = argv[1], argv[2:]
    if cmd == "tokenizer":
        return check_tokenizer(a[0])
    if cmd == "hf-dir":
        return check_hf_dir(a[0], a[1], a[2])
    if cmd == "gguf-dir":
        return check_gguf_dir(a[0], a[1], a[2])
    if cmd == "peft":
        return check_peft(a[0], a[1], *a[2:3])
    if cmd == "merged-logits":
        return merged_logits(a[0], a[1], a[2], a[3])
    print(__doc__)
    return 64


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The PEFT package's own reading of an adapter on gpt-oss's stacked experts
(tests/bats/moe.bats, mxfp4_hf.bats).

    peft_oss_logits.py BASE ADAPTER TOKENS OUT
    peft_oss_logits.py --write BASE ADAPTER

transformers before 4.55 has no gpt-oss, so BASE (a Hugging Face gpt_oss
directory, its experts bf16/f32 or MXFP4 blocks as transformers dequantizes
them: model_ref.hf_model) becomes a torch module tree with HF's parameter
names and modules where PEFT looks for them: model.layers.L.self_attn.q_proj
... o_proj (nn.Linear, with bias), model.layers.L.mlp.router (weight, bias)
and model.layers.L.mlp.experts, holding gate_up_proj [E, dim, 2I],
gate_up_proj_bias, down_proj [E, I, dim] and down_proj_bias registered in
GptOssExperts' order (PEFT wraps them in that order) and marked
is_transposed as transformers 5 marks it (PEFT >= 0.19 reads the [E, in, out]
layout from it). Its forward is model_ref.forward with each projection and
each layer's experts run through these modules, so PEFT's LoRA layers and
ParamWrappers (the expert delta) act where transformers' would.

PEFT puts ADAPTER on it (get_peft_model with the adapter_config.json PEFT
reads, its task_type dropped: the tree is no PreTrainedModel; then
set_peft_model_state_dict with adapter_model.safetensors): every tensor of
the file must be one PEFT made, holding the file's values (else exit 1).
Writes the logits at every position of TOKENS as raw float32 [T, vocab] to
OUT (PEFT's forward, the adapter unmerged), OUT.base (the base alone) and
OUT.merged (after PEFT's merge_and_unload), and prints what PEFT read.
--write has PEFT make an adapter of its own on that tree and save it to
ADAPTER (save_pretrained): r 4, alpha 8, q_proj and v_proj and both stacked
parameters, every factor random (init_lora_weights false; torch seed 0),
float32, base_model_name_or_path BASE as given: what our tools must read.
Runs in .venv-peft (scripts/setup/venv.sh: peft >= 0.17, the first with
target_parameters).
"""
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_ref  # noqa: E402


class Router(nn.Module):
    """GptOssTopKRouter's parameters (not an nn.Linear: "all-linear" leaves it)."""

    def __init__(self, W, p):
        super().__init__()
        self.weight = nn.Parameter(W[p + "weight"].clone(), requires_grad=False)
        self.bias = nn.Parameter(W[p + "bias"].clone(), requires_grad=False)


class Experts(nn.Module):
    def __init__(self, W, p):
        super().__init__()
        self.is_transposed = True
        for n in ("gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias"):
            setattr(self, n, nn.Parameter(W[p + n].clone(), requires_grad=False))

    def forward(self, c, p, router, h):
        # read here, inside PEFT's ParamWrapper: W + its delta
        W = {p + "mlp.router.weight": router.weight, p + "mlp.router.bias": router.bias}
        for n in ("gate_up_proj", "gate_up_proj_bias", "down_proj", "down_proj_bias"):
            W[p + "mlp.experts." + n] = getattr(self, n)
        return model_ref.oss_moe(c, W, p, h)


def linear(W, name):
    w = W[name + ".weight"]
    m = nn.Linear(w.shape[1], w.shape[0], bias=name + ".bias" in W, dtype=w.dtype)
    m.weight = nn.Parameter(w.clone(), requires_grad=False)
    if name + ".bias" in W:
        m.bias = nn.Parameter(W[name + ".bias"].clone(), requires_grad=False)
    return m


class Oss(nn.Module):
    def __init__(self, c, W):
        super().__init__()
        self.c, self.W = c, W
        self.model = nn.Module()
        self.model.layers = nn.ModuleList()
        for i in range(c["L"]):
            p, layer = f"model.layers.{i}.", nn.Module()
            layer.self_attn = nn.Module()
            for n in ("q", "k", "v", "o"):
                setattr(layer.self_attn, f"{n}_proj", linear(W, p + f"self_attn.{n}_proj"))
            layer.mlp = nn.Module()
            layer.mlp.router = Router(W, p + "mlp.router.")
            layer.mlp.experts = Experts(W, p + "mlp.experts.")
            self.model.layers.append(layer)

    def forward(self, tokens):
        c = dict(self.c)
        c["linear"] = lambda name, x: self.get_submodule(name)(x)
        c["moe"] = lambda p, h: self.get_submodule(p + "mlp.experts")(c, p, self.get_submodule(p + "mlp.router"), h)
        return model_ref.forward(c, self.W, tokens)


def logits(model, ids):
    with torch.no_grad():
        return model(ids).numpy().astype("<f4")


def write(base_dir, adapter_dir):
    from peft import LoraConfig, get_peft_model
    torch.manual_seed(0)
    model = Oss(*model_ref.hf_model(base_dir)).to(torch.float32)  # factors saved as float32, as a user's
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False,
                     target_parameters=list(model_ref.OSS_PARAMS))
    pm = get_peft_model(model, cfg)
    pm.peft_config["default"].base_model_name_or_path = base_dir
    pm.save_pretrained(adapter_dir)
    print("peft: wrote", len(pm.state_dict()), "tensors' model,", sorted(os.listdir(adapter_dir)))
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--write":
        return write(*sys.argv[2:])
    if len(sys.argv) != 5:
        sys.exit("usage: peft_oss_logits.py BASE ADAPTER TOKENS OUT | --write BASE ADAPTER")
    import peft
    from peft import LoraConfig, get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict
    from safetensors.torch import load_file
    base_dir, adapter_dir, tokens, out = sys.argv[1:]
    ids = model_ref.read_tokens(tokens)
    c, W = model_ref.hf_model(base_dir)
    model = Oss(c, W).eval()
    logits(model, ids).tofile(out + ".base")
    cfg = LoraConfig.from_pretrained(adapter_dir)
    cfg.task_type, cfg.inference_mode = None, True
    pm = get_peft_model(model, cfg)
    file = load_file(os.path.join(adapter_dir, "adapter_model.safetensors"))
    result = set_peft_model_state_dict(pm, file)
    held = get_peft_model_state_dict(pm)
    bad = sorted(set(file) ^ set(held)) + list(result.unexpected_keys)
    bad += [k for k in file if k in held and not torch.equal(held[k].to(file[k].dtype), file[k])]
    print("peft:", peft.__version__, "r", cfg.r, "alpha", cfg.lora_alpha, "rslora", cfg.use_rslora,
          "target_modules", ",".join(sorted(cfg.target_modules or [])),
          "target_parameters", ",".join(cfg.target_parameters or []))
    print("peft: lora tensors", len(held), "of", len(file), "in the file")
    if bad:
        print("peft: tensors PEFT did not make or load as the file has them:", bad[:4])
        return 1
    logits(pm, ids).tofile(out)
    logits(pm.merge_and_unload(), ids).tofile(out + ".merged")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The peer of bench/qlora.sh: one GRPO LoRA r=16 step in PyTorch eager with
PEFT (CPU, float32 base, autograd) on a Hugging Face model of a named shape
with random weights, over the batch file qlora.sh writes; prints the step's
time.

    python bench/qlora_peer.py --batch FILE --shape smollm2-135m|qwen2.5-1.5b|qwen2.5-7b
        [--threads N] [--trials 1]

A line "kv tok_s=... seconds=..." is the result for bench/qlora.sh.

The model: transformers' LlamaForCausalLM or Qwen2ForCausalLM built from
the shape's config (bench/gpu_models.py's, Qwen2.5-7B's added here: hidden
3584, FFN 18944, 28 layers, 28 and 4 heads, vocabulary 152,064, untied
head), float32, eager attention, random initialisation. PEFT's LoraConfig
r=16, alpha 32, dropout 0 on q, k, v, o, gate, up and down (grpo-update's
--lora-targets default); everything else frozen.

The step, as grpo-update computes it with qlora.sh's flags (--lr 1e-6
--beta 0, --lora-r 16): the records' sequences packed into micro-batches of
at most 2048 tokens (bench/update_peer.py's packing); per micro-batch the
log-probability of each completion token under logits / temperature, the
GRPO loss at token level (ratio = exp(logp - the records' logprobs),
-min(ratio A, clip(ratio, 0.8, 1.2) A), averaged over each completion, then
over all completions), backward; the gradient norm clipped to 1, one AdamW
step. Not the same: the LM head runs on every row (transformers computes
all logits), q, k and v are separate matmuls, attention masks the whole
[T, T] scores, and the step time excludes model creation and batch reading
(grpo-update's metrics "seconds" includes its model load and batch read).
Timing: a warm-up step on the first sequence (every buffer and the
optimizer state allocated), then the best of --trials whole steps."""
import argparse
import math
import os
import sys
import time

import torch
import transformers
from peft import LoraConfig, get_peft_model

from gpu_models import SHAPES as HF_SHAPES
from update_peer import die, micro_batches, read_batch

SHAPES = dict(HF_SHAPES, **{"qwen2.5-7b": dict(HF_SHAPES["qwen2.5-1.5b"], hidden_size=3584, intermediate_size=18944,
                                               num_attention_heads=28, num_key_value_heads=4,
                                               vocab_size=152064, tie_word_embeddings=False)})
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def build(shape, r):
    cfg = dict(SHAPES[shape], hidden_act="silu", bos_token_id=1, eos_token_id=2, torch_dtype="float32",
               attn_implementation="eager")
    cls = transformers.Qwen2Config if cfg["model_type"] == "qwen2" else transformers.LlamaConfig
    conf = cls(**{k: v for k, v in cfg.items() if k not in ("model_type", "architectures")})
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(conf, torch_dtype=torch.float32)
    model = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, lora_dropout=0.0, target_modules=TARGETS))
    return model


def micro_step(model, mb, n_total, temp, eps):
    toks, np_ = mb["tokens"], mb["n_prompt"]
    logits = model(input_ids=toks).logits[:, np_ - 1:-1] / temp
    logp = logits.log_softmax(-1).gather(-1, toks[:, np_:, None]).squeeze(-1)
    ratio = torch.exp(logp - mb["old"])
    a = mb["adv"][:, None]
    loss = (-torch.min(ratio * a, ratio.clamp(1 - eps, 1 + eps) * a)).mean(-1).sum() / n_total
    loss.backward()
    return loss.item()


def step(model, params, opt, mbs, n_total, temp):
    opt.zero_grad(set_to_none=True)
    loss = sum(micro_step(model, mb, n_total, temp, 0.2) for mb in mbs)
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    opt.step()
    return loss


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", required=True)
    ap.add_argument("--shape", required=True, choices=sorted(SHAPES))
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--trials", type=int, default=1)
    ap.add_argument("--lora-r", type=int, default=16)
    a = ap.parse_args()
    if a.threads < 1 or a.trials < 1 or a.lora_r < 1:
        die(64, "--threads, --trials and --lora-r must be >= 1")
    torch.set_num_threads(a.threads)
    recs, temp = read_batch(a.batch, 0)
    mbs = micro_batches(recs, 2048)
    n_tokens = sum(len(r["prompt_tokens"]) + len(r["completion_tokens"]) for r in recs)
    vocab = SHAPES[a.shape]["vocab_size"]
    if any(t >= vocab for mb in mbs for t in mb["tokens"].flatten().tolist()):
        die(65, f"{a.batch}: a token id outside {a.shape}'s vocabulary of {vocab}")
    model = build(a.shape, a.lora_r)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-6, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    first = dict(mbs[0], tokens=mbs[0]["tokens"][:1], old=mbs[0]["old"][:1], adv=mbs[0]["adv"][:1])
    step(model, params, opt, [first], 1, temp)  # warm-up
    best = math.inf
    for _ in range(a.trials):
        t0 = time.perf_counter()
        step(model, params, opt, mbs, len(recs), temp)
        best = min(best, time.perf_counter() - t0)
    n_base = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.get_num_threads()} threads; "
          f"{a.shape}: {n_base} frozen float32 parameters, {sum(p.numel() for p in params)} LoRA; "
          f"{len(recs)} sequences, {n_tokens} tokens; best of {a.trials}: {best:.2f} s", file=sys.stderr)
    print(f"kv tok_s={n_tokens / best:.3f} seconds={best:.3f}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The peer of make bench-gpu's whole-GRPO-step row (bench/gpu_grpo_step.sh):
TRL's GRPOTrainer without vLLM (generation by transformers on the training
model) on the same model, prompts and settings as the grpo tools' step: the
prompts' token ids decoded to text (TRL tokenizes them again), K
completions each of exactly MAX_NEW tokens (min_new_tokens) at temperature
1, a cheap reward (the completion's distinct characters: the reward's cost
is not what is measured), loss "grpo" without KL (beta 0), lr 1e-6, the
whole generation batch in one generate call (steps_per_generation =
gradient accumulation), micro-batches of MICRO completions, one optimizer
step per generation. The model is loaded in float32 (TRL's default dtype)
and trained with bf16 autocast (bf16=True): float32 master weights and
bf16 products, as grpo-update --device cuda. Two steps; the second is timed
(the first pays CUDA's and the allocator's start-up).

Where TRL is not installed, install its wheels (scripts/gpu/wheels.sh,
docs/gpu.md) and put them on PYTHONPATH.

Prints `kv name=value` lines.
Usage: python3 bench/gpu_trl_peer.py MODEL_DIR PROMPTS.jsonl K MAX_NEW MICRO OUTDIR
"""
import json
import sys
import time

import torch
from datasets import Dataset
from transformers import AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer


class StepClock(TrainerCallback):
    def __init__(self):
        self.begin, self.secs = None, []

    def on_step_begin(self, args, state, control, **kw):
        torch.cuda.synchronize()
        self.begin = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        torch.cuda.synchronize()
        self.secs.append(time.perf_counter() - self.begin)


def distinct_chars(completions, **kw):
    return [float(len(set(c))) for c in completions]


def main():
    model_dir, prompts, k, max_new, micro, outdir = sys.argv[1:7]
    k, max_new, micro = int(k), int(max_new), int(micro)
    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = [json.loads(line)["prompt_tokens"] for line in open(prompts)]
    texts = [tok.decode(p) for p in ids]
    n = len(texts) * k  # completions per step
    if n % micro:
        sys.exit("gpu_trl_peer.py: MICRO must divide prompts x K")
    cfg = GRPOConfig(
        output_dir=outdir, num_generations=k, max_completion_length=max_new, temperature=1.0, top_p=1.0, top_k=0,
        generation_kwargs={"min_new_tokens": max_new}, per_device_train_batch_size=micro,
        gradient_accumulation_steps=n // micro, learning_rate=1e-6, beta=0.0, loss_type="grpo", epsilon=0.2,
        max_grad_norm=1.0, bf16=True, max_steps=2, logging_steps=1, save_strategy="no", report_to=[],
        shuffle_dataset=False, model_init_kwargs={"dtype": "float32", "attn_implementation": "sdpa"},
        seed=1)
    # two steps' worth of prompts: each step draws len(texts) of them
    data = Dataset.from_dict({"prompt": texts + texts})
    clock = StepClock()
    trainer = GRPOTrainer(model=model_dir, reward_funcs=distinct_chars, args=cfg, train_dataset=data,
                          processing_class=tok, callbacks=[clock])
    torch.cuda.reset_peak_memory_stats()
    trainer.train()
    secs = clock.secs[-1]
    tokens = n * max_new
    print(f"kv trl_step completions={n} sampled_tokens={tokens} secs={secs:.3f} all_steps={clock.secs} "
          f"sampled_tok_s={tokens / secs:.1f} peak_mib={torch.cuda.max_memory_allocated() / 2**20:.0f}")


if __name__ == "__main__":
    main()

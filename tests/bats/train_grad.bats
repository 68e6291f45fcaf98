#!/usr/bin/env bats
# Gradients of the GRPO loss against PyTorch autograd (tests/ref/train_ref.py):
# every architecture, full fine-tuning and LoRA, token and sequence
# importance, beta > 0 with a reference, clipping active on both sides,
# micro-batches with --recompute, multi-turn records whose environment tokens
# (completion_mask 0) are context only, a mixture of experts (qwen3_moe: every
# expert and the router), and one routed as a record's routing says
# (grpo-update --routing replay: random experts, the same fixed selection in
# the reference), LoRA on each expert's gate, up and down (PEFT's
# mlp.experts.X names) beside a dense layer's, and on gpt-oss's stacked
# experts (PEFT's ParamWrapper delta of the factors as PEFT saves them, on a
# float32, q8 and MXFP4 base). Relative error <= 1e-4 per tensor.
# The bf16 cases (grpo-update --compute bf16: every matrix product on bf16
# operands) within the bf16 tolerances train_ref.py derives, and no closer
# than 2^-12 (else the products were not bf16); skipped on a CPU without
# AVX-512 BF16. LoRA over a frozen base packed in q8, q4k or bf16 (grpo-update
# --base-weights; a mixture's experts each packed apart; the embeddings and
# the LM head packed too, a tied head once), or a gpt-oss's
# MXFP4 experts kept as the file's blocks (--base-weights mxfp4; of a bf16
# file, its other matrices bf16 panels, the file's values), or a Q4_K
# GGUF's blocks (--base-weights q4k), against the
# reference on the dequantized values the kernels read, to the float32
# tolerance (1e-4).
# needs: venv
load helpers

grad_case() {
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/train_ref.py" "$1" "$T/$1"
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "gradient vs autograd: llama, full fine-tuning, grpo" { grad_case llama-full; }
@test "gradient vs autograd: llama, tied embeddings, beta 0.04" { grad_case llama-tied-full-beta; }
@test "gradient vs autograd: llama3 rope scaling, dapo, clip-higher" { grad_case llama3rope-full-dapo; }
@test "gradient vs autograd: qwen2 biases, sequence importance, bnpo, beta" { grad_case qwen2-full-seq; }
@test "gradient vs autograd: qwen3 q/k norm, dr_grpo, beta" { grad_case qwen3-full-drgrpo; }
@test "gradient vs autograd: llama, LoRA on every projection" { grad_case llama-lora; }
@test "gradient vs autograd: qwen2, LoRA q,v,down with beta" { grad_case qwen2-lora-beta; }
@test "gradient vs autograd: qwen3, rsLoRA, sequence importance" { grad_case qwen3-lora-rslora-seq; }
@test "gradient vs autograd: one sequence per micro-batch with --recompute" { grad_case llama-full-micro-recompute; }
@test "gradient vs autograd: llama, entropy bonus (through the whole softmax)" { grad_case llama-full-entropy; }
@test "gradient vs autograd: qwen2, LoRA, dapo, beta, entropy bonus, two micro-batches" { grad_case qwen2-lora-entropy-dapo-micro; }
@test "gradient vs autograd: multi-turn records, environment tokens context only (grpo, beta, entropy bonus)" {
    grad_case llama-full-turns
}
@test "gradient vs autograd: multi-turn records, qwen2, sequence importance, dr_grpo" {
    grad_case qwen2-full-turns-seq-drgrpo
}
@test "gradient vs autograd: multi-turn records, qwen3 LoRA, dapo, one sequence per micro-batch, --recompute" {
    grad_case qwen3-lora-turns-dapo-micro-recompute
}
@test "gradient vs autograd: qwen3_moe, full, renormalised top-2 of 8 experts, beta" { grad_case qwen3moe-full-beta; }
@test "gradient vs autograd: qwen3_moe, a dense layer, sequence importance, dr_grpo, --recompute" {
    grad_case qwen3moe-dense0-full-seq-micro-recompute
}
@test "gradient vs autograd: qwen3_moe, entropy bonus, multi-turn records" { grad_case qwen3moe-full-entropy-turns; }
@test "gradient vs autograd: qwen3_moe, LoRA on q,k,v,o, dapo, beta" { grad_case qwen3moe-lora-qkvo-dapo; }
@test "gradient vs autograd: qwen3_moe, LoRA on every projection and each expert's, dapo, beta" {
    grad_case qwen3moe-lora-experts-all-dapo
}
@test "gradient vs autograd: qwen3_moe, rsLoRA on the experts' gate, up and down only, sequence importance" {
    grad_case qwen3moe-lora-experts-gud-seq
}
@test "gradient vs autograd: qwen3_moe, LoRA on a dense layer's FFN and the experts', one sequence per micro-batch, --recompute" {
    grad_case qwen3moe-dense0-lora-experts-micro-recompute
}
@test "gradient vs autograd: qwen3_moe, replayed routing (renormalised), beta" { grad_case qwen3moe-replay-full-beta; }
@test "gradient vs autograd: qwen3_moe, replayed routing, a dense layer, sequence importance, --recompute" {
    grad_case qwen3moe-dense0-replay-seq-micro-recompute
}
@test "gradient vs autograd: qwen3_moe, replayed routing, LoRA on q,k,v,o, dapo" { grad_case qwen3moe-replay-lora-qkvo-dapo; }
@test "gradient vs autograd: gpt_oss, replayed routing, full, beta" { grad_case gptoss-replay-full-beta; }
@test "gradient vs autograd: qwen3_moe, the router's load-balancing loss, two micro-batches" {
    grad_case qwen3moe-full-balance-micro
}
@test "gradient vs autograd: gpt_oss, the router's load-balancing loss (router bias), beta" {
    grad_case gptoss-full-balance
}
@test "gradient vs autograd: llama, LoRA over a frozen q8 base" { grad_case llama-lora-q8base; }
@test "gradient vs autograd: qwen2 biases, LoRA q,v,down over a frozen q8 base, beta" { grad_case qwen2-lora-q8base-beta; }
@test "gradient vs autograd: llama, LoRA over a frozen q4k base, beta" { grad_case llama-lora-q4kbase-beta; }
@test "gradient vs autograd: qwen3, LoRA q,v,down over a frozen q4k base, sequence importance, micro-batches, --recompute" {
    grad_case qwen3-lora-q4kbase-seq-micro-recompute
}
@test "gradient vs autograd: llama, tied head, LoRA over a frozen q8 base (the embeddings packed once), beta" {
    grad_case llama-tied-lora-q8base-beta
}
@test "gradient vs autograd: llama, tied head, LoRA q,v,down over a frozen q4k base, micro-batches, --recompute" {
    grad_case llama-tied-lora-q4kbase-micro-recompute
}
@test "gradient vs autograd: llama, tied head, LoRA over a frozen bf16 base" { grad_case llama-tied-lora-bf16base; }
@test "gradient vs autograd: qwen2, LoRA over a Q4_K GGUF's blocks as they are (random blocks), beta" {
    grad_case qwen2-lora-q4kgguf-beta
}
@test "gradient vs autograd: qwen3, LoRA over a frozen bf16 base, sequence importance, --recompute" {
    grad_case qwen3-lora-bf16base-seq-micro-recompute
}
@test "gradient vs autograd: qwen3_moe, LoRA on every projection and each expert's over a frozen q8 base, dapo, beta" {
    grad_case qwen3moe-lora-experts-all-q8base-dapo
}
@test "gradient vs autograd: qwen3_moe, LoRA on every projection and each expert's over a frozen q4k base, sequence importance" {
    grad_case qwen3moe-lora-experts-all-q4kbase-seq
}
@test "gradient vs autograd: qwen3_moe, a dense layer, LoRA with the experts' over a frozen bf16 base, --recompute" {
    grad_case qwen3moe-dense0-lora-experts-bf16base-micro-recompute
}
@test "gradient vs autograd: gpt_oss, LoRA on q,k,v,o over a frozen q8 base (its experts q8), beta" {
    grad_case gptoss-lora-qkvo-q8base-beta
}
@test "gradient vs autograd: gpt_oss, LoRA on q,k,v,o over its MXFP4 experts kept as blocks, beta" {
    grad_case gptoss-mxfp4-lora-qkvo-mxfp4base-beta
}
@test "gradient vs autograd: gpt_oss, rsLoRA over its MXFP4 experts, dapo, one sequence per micro-batch, --recompute" {
    grad_case gptoss-mxfp4-lora-qkvo-mxfp4base-dapo-micro-recompute
}
@test "gradient vs autograd: gpt_oss of a bf16 file, LoRA on q,k,v,o over its MXFP4 experts, the rest bf16 panels, beta" {
    grad_case gptoss-mxfp4bf16-lora-qkvo-mxfp4base-beta
}
@test "gradient vs autograd: gpt_oss of a bf16 file, LoRA on every projection over its file's formats, --recompute" {
    grad_case gptoss-mxfp4bf16-lora-experts-mxfp4base-dapo-micro-recompute
}
@test "gradient vs autograd: qwen2, YaRN RoPE, sliding-window layers, beta" { grad_case qwen2-yarn-window-full-beta; }
@test "gradient vs autograd: llama, YaRN, sliding windows, LoRA on q,k,v,o, dapo" {
    grad_case llama-yarn-window-lora-qkvo-dapo
}
@test "gradient vs autograd: gpt_oss, full (sinks, biases, experts, router), beta" { grad_case gptoss-full-beta; }
@test "gradient vs autograd: gpt_oss, LoRA on q,k,v,o, dapo, beta" { grad_case gptoss-lora-qkvo-dapo; }
@test "gradient vs autograd: gpt_oss, LoRA on every projection, its experts as PEFT's ParamWrapper, dapo, beta" {
    grad_case gptoss-lora-experts-all-dapo
}
@test "gradient vs autograd: gpt_oss, rsLoRA on gate_up_proj alone, sequence importance" {
    grad_case gptoss-lora-experts-gateup-seq
}
@test "gradient vs autograd: gpt_oss, LoRA on down_proj alone, one sequence per micro-batch, --recompute" {
    grad_case gptoss-lora-experts-down-micro-recompute
}
@test "gradient vs autograd: gpt_oss, LoRA on every projection over a frozen q8 base, beta" {
    grad_case gptoss-lora-experts-q8base-beta
}
@test "gradient vs autograd: gpt_oss, LoRA on its MXFP4 experts as float32, dapo" {
    grad_case gptoss-mxfp4-lora-experts-f32-dapo
}
@test "gradient vs autograd: gpt_oss, LoRA on its MXFP4 experts kept as blocks, beta" {
    grad_case gptoss-mxfp4-lora-experts-mxfp4base-beta
}
@test "gradient vs autograd, bf16 products: llama, full fine-tuning, beta" { needs_bf16; grad_case llama-full-bf16; }
@test "gradient vs autograd, bf16 products: qwen2 biases, sequence importance, bnpo, beta" {
    needs_bf16; grad_case qwen2-full-seq-bf16
}
@test "gradient vs autograd, bf16 products: qwen3, entropy bonus, two micro-batches, --recompute" {
    needs_bf16; grad_case qwen3-full-entropy-micro-recompute-bf16
}
@test "gradient vs autograd, bf16 products: llama, tied embeddings" { needs_bf16; grad_case llama-tied-full-bf16; }
@test "gradient vs autograd, bf16 products: llama, LoRA on every projection" { needs_bf16; grad_case llama-lora-bf16; }
@test "gradient vs autograd, bf16 products: qwen3_moe with every expert chosen (no choice to flip), beta" {
    needs_bf16; grad_case qwen3moe-allexperts-full-bf16
}
@test "gradient vs autograd, bf16 products: qwen3 LoRA, multi-turn records, dapo, beta" {
    needs_bf16; grad_case qwen3-lora-turns-bf16
}

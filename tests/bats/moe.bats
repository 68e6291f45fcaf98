#!/usr/bin/env bats
# A mixture of experts (Qwen3-MoE, HF qwen3_moe) through the tools: a tiny
# random one (2 layers, 8 experts, top 2, renormalised) rolled out and
# checked token by token against the float64 reference (tests/ref/
# check_rollout.py over model_ref.py's Qwen3MoeSparseMoeBlock), records that
# --batch, --threads and --shard leave alone, a Q8_0 GGUF's experts taken
# straight into q8's, full fine-tuning and LoRA checkpoints that resume and
# roll out (LoRA on each expert's projections rolled out and exported merged,
# against the reference's own merge; PEFT loading it where the PEFT venv's
# transformers has Qwen3-MoE), each export read back, and transformers 5's
# stacked experts; a tiny gpt_oss rolled out against the reference and trained
# with LoRA on its attention and on its stacked experts as PEFT adapts them
# (target_parameters: the files, the refusals that stay, rolled out and
# exported merged against the reference's merge of PEFT's delta, and PEFT
# itself putting the adapter on gpt-oss's modules where the PEFT venv's peft
# has target_parameters). The layer's logits and gradients: model.bats,
# train_grad.bats; llama.cpp on its GGUF: llama_cpp.bats.
# needs: venv
load helpers

setup_file() {
    export MOE="$BATS_FILE_TMPDIR/moe"
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3_moe "$MOE" --norm-topk
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$MOE"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch "$BATS_FILE_TMPDIR/batch.jsonl" 16 97
    for i in 1 2 3 4 5 6; do
        echo "{\"id\":\"p$i\",\"prompt_tokens\":[1,$((i + 4)),$((i * 3)),7]}"
    done > "$BATS_FILE_TMPDIR/prompts.jsonl"
}

needs_moe() { [ -d "$MOE" ] || skip "no test venv (make venv)"; }
P() { echo "$BATS_FILE_TMPDIR/prompts.jsonl"; }
B() { echo "$BATS_FILE_TMPDIR/batch.jsonl"; }

# check_lp MODEL FILE TOL [MEAN_TOL]: every logprob against the float64 reference
check_lp() { ref_check check_rollout.py "$@"; }

@test "rollout: sampled and greedy tokens' log-probs are the float64 reference's (1e-4); bf16 experts at bf16's tolerance" {
    needs_moe
    grpo-rollout --model "$MOE" --in "$(P)" -k 4 --max-new-tokens 16 --seed 5 --weights f32 --out r.jsonl
    [ "$(wc -l < r.jsonl)" -eq 24 ]
    # 1e-4 as for the dense models (measured: mean 2.4e-7)
    check_lp "$MOE" r.jsonl 1e-4
    grpo-rollout --model "$MOE" --in "$(P)" -k 1 --temperature 0 --max-new-tokens 16 --weights f32 --out g.jsonl
    check_lp "$MOE" g.jsonl 1e-4
    # bf16 experts and attention: rollout_weights.bats's bf16 bounds (measured max 0.02, mean 0.004)
    grpo-rollout --model "$MOE" --in "$(P)" -k 4 --max-new-tokens 16 --seed 5 --weights bf16 --out b.jsonl
    check_lp "$MOE" b.jsonl 0.25 0.07
}

@test "rollout --weights bf16 and q8: --batch, --threads and --shard change no byte of the records" {
    needs_moe
    for w in bf16 q8; do
        args=(--model "$MOE" --in "$(P)" -k 4 --max-new-tokens 12 --seed 5 --weights "$w")
        grpo-rollout "${args[@]}" --batch 1 --threads 1 --out "a-$w.jsonl"
        grpo-rollout "${args[@]}" --batch 16 --threads 2 --out "b-$w.jsonl"
        cmp "a-$w.jsonl" "b-$w.jsonl"
        grpo-rollout "${args[@]}" --shard 0/2 --out "s0-$w.jsonl"
        grpo-rollout "${args[@]}" --shard 1/2 --out "s1-$w.jsonl"
        cmp <(sort "a-$w.jsonl") <(cat "s0-$w.jsonl" "s1-$w.jsonl" | sort)
    done
}

@test "a Q8_0 GGUF's experts go straight into q8's blocks, each its slice of the layer's tensor: records as widened" {
    needs_moe
    grpo-export --model "$MOE" --format gguf --dtype q8_0 --out q8_0.gguf
    grpo-export --model q8_0.gguf --format gguf --dtype f32 --out f32.gguf # the Q8_0 values, exactly
    args=(--in "$(P)" -k 2 --max-new-tokens 12 --seed 3 --policy p --weights q8 --progress)
    run -0 grpo-rollout --model q8_0.gguf "${args[@]}" --out direct.jsonl
    # 2 layers of 4 attention matrices and 3 of each of 8 experts, and the head
    [[ "$output" == *"; 57 of 57 matrices from the file's Q8_0 blocks)"* ]]
    run -0 grpo-rollout --model f32.gguf "${args[@]}" --out widened.jsonl
    [[ "$output" != *"matrices from the file"* ]]
    cmp direct.jsonl widened.jsonl
}

@test "update: full fine-tuning writes every expert and its moments, resumes, and the checkpoint rolls out" {
    needs_moe
    grpo-update --model "$MOE" --in "$(B)" --out c1 --lr 1e-3
    "$GRPO_PY" - c1 <<'PY'
import sys
from safetensors.numpy import load_file
d = sys.argv[1]
w = load_file(d + "/model.safetensors")
o = load_file(d + "/grpo/optimizer.safetensors")
assert w["model.layers.1.mlp.experts.7.down_proj.weight"].shape == (64, 32)
assert w["model.layers.0.mlp.gate.weight"].shape == (8, 64)
assert not any(".mlp.gate_proj." in n for n in w)
assert set(o) == {p + n for n in w for p in ("exp_avg.", "exp_avg_sq.")}
# the router and the experts moved
assert abs(o["exp_avg.model.layers.0.mlp.gate.weight"]).max() > 0
assert abs(o["exp_avg.model.layers.1.mlp.experts.3.up_proj.weight"]).max() > 0
PY
    cmp <(jq -S 'del(.torch_dtype)' "$MOE/config.json") <(jq -S 'del(.torch_dtype)' c1/config.json)
    grpo-update --model c1 --in "$(B)" --out c2 --lr 1e-3
    jq -e '.step == 2' c2/grpo/state.json
    grpo-rollout --model c2 --in "$(P)" -k 2 --max-new-tokens 4 --out r.jsonl
    [ "$(wc -l < r.jsonl)" -eq 12 ]
}

@test "update: LoRA on q,k,v,o by default (PEFT names), continued" {
    needs_moe
    grpo-update --model "$MOE" --in "$(B)" --out l1 --lr 1e-2 --lora-r 4
    jq -e '(.target_modules | sort) == ["k_proj","o_proj","q_proj","v_proj"]' l1/adapter_config.json
    jq -e '.flags.lora_targets == "q_proj,k_proj,v_proj,o_proj"' l1/grpo/state.json
    grpo-update --model l1 --in "$(B)" --out l2 --lr 1e-2 --lora-r 4
    jq -e '.step == 2' l2/grpo/state.json
    grpo-export --model l2 --format peft --out pe
    jq -e '(.target_modules | sort) == ["k_proj","o_proj","q_proj","v_proj"]' pe/adapter_config.json
    grpo-rollout --model l2 --in "$(P)" -k 1 --max-new-tokens 4 --out r.jsonl
    [ "$(wc -l < r.jsonl)" -eq 6 ]
}

@test "update: LoRA on each expert's gate, up and down (PEFT's names), resumed; rolled out and exported merged (1e-4)" {
    needs_moe
    grpo-update --model "$MOE" --in "$(B)" --out x1 --lr 1e-2 --lora-r 4 --lora-targets gate,up,down --lora-dropout 0.1
    jq -e '.flags.lora_targets == "gate_proj,up_proj,down_proj"' x1/grpo/state.json
    grpo-update --model x1 --in "$(B)" --out x2 --lr 1e-2
    jq -e '.step == 2' x2/grpo/state.json
    "$GRPO_PY" - x1 x2 <<'PY'
import sys
from safetensors.numpy import load_file
a, b = (load_file(d + "/adapter_model.safetensors") for d in sys.argv[1:3])
o = load_file(sys.argv[2] + "/grpo/optimizer.safetensors")
p = "base_model.model.model.layers.1.mlp.experts.5.down_proj.lora_"
assert a[p + "A.weight"].shape == (4, 32) and a[p + "B.weight"].shape == (64, 4)
# 2 layers of 8 experts, 3 projections, A and B: nothing else
assert len(a) == 2 * 8 * 3 * 2 and all(".mlp.experts." in n for n in a), sorted(a)[:4]
# the second step moved each expert's B from the first's (this batch reaches every expert)
moved = [n for n in a if n.endswith("lora_B.weight") and abs(a[n] - b[n]).max() > 0]
assert len(moved) == 2 * 8 * 3, len(moved)
assert set(o) == {p + n for n in a for p in ("exp_avg.", "exp_avg_sq.")}
PY
    grpo-export --model x2 --format peft --out pe
    cmp x2/adapter_model.safetensors pe/adapter_model.safetensors
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_export.py" peft pe "$MOE"
    echo "$output"
    [ "$status" -eq 0 ]
    # rolled out merged: the float64 reference merges the adapter from its
    # files (W + scale B A by PEFT name) and gives the records' log-probs;
    # 1e-4 as for the base (measured: at most 6.4e-7)
    grpo-rollout --model x2 --in "$(P)" -k 2 --max-new-tokens 16 --seed 5 --weights f32 --out r.jsonl
    check_lp x2 r.jsonl 1e-4
    # the experts' adapter moved them: the base's reference is far from them (measured: up to 0.08)
    run check_lp "$MOE" r.jsonl 1e-3
    [ "$status" -eq 1 ]
    # the HF export holds the merged weights: the same log-probs from its own reference
    grpo-export --model x2 --format hf --dtype f32 --out merged
    check_lp merged r.jsonl 1e-4
}

@test "peft: the PEFT package puts an experts adapter on Qwen3-MoE and gives our logits (transformers 4.51 to 4.x)" {
    needs_moe
    py="${GRPO_PEFT_PY:-$GRPO_ROOT/.venv-peft/bin/python}"
    [ -x "$py" ] || skip "no transformers/PEFT venv (make venv)"
    # Qwen3-MoE came with transformers 4.51, its experts one nn.Linear each
    # (PEFT's target_modules find them) until transformers 5 stacked them
    v=$("$py" -c 'import transformers as t; print(t.__version__)')
    "$py" -c 'import sys, transformers as t; v = tuple(int(x) for x in t.__version__.split(".")[:2]); sys.exit(not ((4, 51) <= v < (5, 0)))' ||
        skip "transformers $v in the PEFT venv: Qwen3-MoE's experts are nn.Linear modules in 4.51 to 4.x only"
    grpo-update --model "$MOE" --in "$(B)" --out x1 --lr 1e-2 --lora-r 4 --lora-targets all
    grpo-export --model x1 --format peft --out pe
    run "$py" "$GRPO_ROOT/tests/ref/transformers_logits.py" "$MOE" pe "$MOE/tokens.txt" peft.f32
    echo "$output"
    [ "$status" -eq 0 ]
    # q, k, v, o and 8 experts' gate, up and down in 2 layers, A and B each
    [[ "$output" == *"peft: lora tensors $(( (4 + 3 * 8) * 2 * 2 ))"* ]]
    GRPO_MODEL_DIR=x1 GRPO_MODEL_TOKENS="$MOE/tokens.txt" GRPO_MODEL_OUT=ours.f32 run -0 "$GRPO_ROOT/build/tests/test_model"
    "$GRPO_PY" -c "
import sys, numpy as np
a, b = np.fromfile('peft.f32', '<f4'), np.fromfile('ours.f32', '<f4')
d = float(np.max(np.abs(a - b)))
print('max abs diff', d)
sys.exit(0 if d <= 1e-4 else 1)"
}

@test "export: HF and GGUF of a GGUF give the source's logits back; the config keeps the expert settings" {
    needs_moe
    grpo-export --model "$MOE" --format gguf --dtype f32 --out m.gguf
    grpo-export --model m.gguf --format hf --dtype f32 --out back
    jq -e '.model_type == "qwen3_moe" and .architectures == ["Qwen3MoeForCausalLM"] and .num_experts == 8
           and .num_experts_per_tok == 2 and .moe_intermediate_size == 32 and .norm_topk_prob == true
           and .decoder_sparse_step == 1 and .mlp_only_layers == []' back/config.json
    for m in "$MOE" m.gguf back; do
        GRPO_MODEL_DIR="$m" GRPO_MODEL_TOKENS="$MOE/tokens.txt" GRPO_MODEL_OUT="$(basename "$m").f32" \
            run -0 "$GRPO_ROOT/build/tests/test_model"
    done
    cmp moe.f32 m.gguf.f32
    cmp moe.f32 back.f32
    # quantized, the router stays F32 as llama.cpp's converter keeps it: its logits choose the experts
    grpo-export --model "$MOE" --format gguf --dtype q8_0 --out q.gguf
    "$GRPO_PY" - q.gguf <<'PY'
import sys
from gguf import GGUFReader, GGMLQuantizationType as T
types = {t.name: t.tensor_type for t in GGUFReader(sys.argv[1]).tensors}
routers = [n for n in types if n.endswith("ffn_gate_inp.weight")]
assert routers and all(types[n] == T.F32 for n in routers), {n: types[n] for n in routers}
assert types["blk.0.attn_q.weight"] == T.Q8_0 and types["blk.0.ffn_gate_exps.weight"] == T.Q8_0
PY
}

@test "transformers 5's stacked experts (gate_up_proj, down_proj) load as the per-expert tensors; a wrong shape is 65" {
    needs_moe
    cp -r "$MOE" fused
    "$GRPO_PY" - fused/model.safetensors <<'PY'
import sys
import torch
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
for layer in range(2):
    p = f"model.layers.{layer}.mlp.experts."
    gate_up = [torch.cat([t.pop(p + f"{x}.gate_proj.weight"), t.pop(p + f"{x}.up_proj.weight")]) for x in range(8)]
    t[p + "gate_up_proj"] = torch.stack(gate_up)
    t[p + ("down_proj" if layer else "down_proj.weight")] = torch.stack([t.pop(p + f"{x}.down_proj.weight") for x in range(8)])
save_file(t, sys.argv[1], metadata={"format": "pt"})
PY
    for m in "$MOE" fused; do
        GRPO_MODEL_DIR="$m" GRPO_MODEL_TOKENS="$MOE/tokens.txt" GRPO_MODEL_OUT="$(basename "$m").f32" \
            run -0 "$GRPO_ROOT/build/tests/test_model"
    done
    cmp moe.f32 fused.f32
    "$GRPO_PY" - fused/model.safetensors <<'PY'
import sys
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
t["model.layers.1.mlp.experts.down_proj"] = t["model.layers.1.mlp.experts.down_proj"][:, :, :16].contiguous()
save_file(t, sys.argv[1], metadata={"format": "pt"})
PY
    GRPO_MODEL_DIR=fused GRPO_MODEL_TOKENS="$MOE/tokens.txt" run "$GRPO_ROOT/build/tests/test_model"
    [ "$status" -eq 65 ]
    [[ "$output" == *"tensor model.layers.1.mlp.experts.down_proj: expected shape [8, 64, 32]"* ]]
}

@test "gpt_oss: rollout log-probs are the float64 reference's (1e-4); LoRA trains and rolls out" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny gpt_oss oss
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" oss
    grpo-rollout --model oss --in "$(P)" -k 2 --max-new-tokens 16 --seed 5 --weights f32 --out r.jsonl
    [ "$(wc -l < r.jsonl)" -eq 12 ]
    # 1e-4 as for the other models (measured: at most 8.2e-7)
    check_lp oss r.jsonl 1e-4
    grpo-update --model oss --in "$(B)" --out l1 --lr 1e-2 --lora-r 4
    [ -f l1/adapter_model.safetensors ]
    grpo-rollout --model l1 --in "$(P)" -k 2 --max-new-tokens 8 --seed 5 --out rl.jsonl
    [ "$(wc -l < rl.jsonl)" -eq 12 ]
    jq -e '(.target_modules | sort) == ["k_proj","o_proj","q_proj","v_proj"] and has("target_parameters") | not' \
        l1/adapter_config.json
}

# oss_tiny: a tiny gpt_oss with a tokenizer in ./oss
oss_tiny() {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny gpt_oss oss
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" oss
}

@test "gpt_oss: LoRA on its stacked experts as PEFT's target_parameters, resumed; rolled out and exported merged (1e-4)" {
    oss_tiny
    grpo-update --model oss --in "$(B)" --out x1 --lr 1e-2 --lora-r 4 --lora-targets all
    jq -e '(.target_modules | sort) == ["k_proj","o_proj","q_proj","v_proj"] and
           .target_parameters == ["mlp.experts.gate_up_proj","mlp.experts.down_proj"] and .lora_dropout == 0' \
        x1/adapter_config.json
    jq -e '.flags.lora_targets == "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"' x1/grpo/state.json
    grpo-update --model x1 --in "$(B)" --out x2 --lr 1e-2
    jq -e '.step == 2' x2/grpo/state.json
    "$GRPO_PY" - x1 x2 <<'PY'
import sys
from safetensors.numpy import load_file
a, b = (load_file(d + "/adapter_model.safetensors") for d in sys.argv[1:3])
o = load_file(sys.argv[2] + "/grpo/optimizer.safetensors")
# 8 experts, r 4, dim 64, I 32: gate_up_proj's ParamWrapper inside down_proj's (PEFT's nesting)
p = "base_model.model.model.layers.1.mlp.experts."
shapes = {p + "base_layer.lora_A.weight": (32, 64), p + "base_layer.lora_B.weight": (64, 32),
          p + "lora_A.weight": (32, 32), p + "lora_B.weight": (64, 32)}
assert all(a[n].shape == s for n, s in shapes.items()), {n: a[n].shape for n in shapes}
assert len(a) == 2 * (4 + 2) * 2, sorted(a)
moved = [n for n in a if n.endswith("lora_B.weight") and abs(a[n] - b[n]).max() > 0]
assert len(moved) == 2 * 6, moved
# the moments per expert: its share of gate_up's A, gate's and up's rows of B, down's A and B
m = {k[len("exp_avg."):] for k in o if k.startswith("exp_avg.")}
want = {f"{p}{x}.{n}.weight" for x in range(8) for n in ("gate_up_proj.lora_A", "gate_proj.lora_B",
                                                          "up_proj.lora_B", "down_proj.lora_A", "down_proj.lora_B")}
assert want <= m and len(m) == 2 * (8 + 5 * 8), sorted(m - want)[:4]
PY
    grpo-export --model x2 --format peft --out pe
    cmp x2/adapter_model.safetensors pe/adapter_model.safetensors
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_export.py" peft pe oss
    echo "$output"
    [ "$status" -eq 0 ]
    # rolled out merged: the float64 reference adds PEFT's ParamWrapper delta
    # of the files' factors to gate_up_proj and down_proj (model_ref.py's
    # merge_adapter); 1e-4 as for the base
    grpo-rollout --model x2 --in "$(P)" -k 2 --max-new-tokens 16 --seed 5 --weights f32 --out r.jsonl
    check_lp x2 r.jsonl 1e-4
    # the adapter moved them: the base's reference is far from them
    run check_lp oss r.jsonl 1e-3
    [ "$status" -eq 1 ]
    # the HF export holds the merged stacked experts: the same log-probs from its own reference
    grpo-export --model x2 --format hf --dtype f32 --out merged
    check_lp merged r.jsonl 1e-4
    # the experts alone: target_modules [], as PEFT writes it
    grpo-update --model oss --in "$(B)" --out e1 --lr 1e-2 --lora-r 4 --lora-targets gate,up,down
    jq -e '.target_modules == [] and (.target_parameters | length) == 2' e1/adapter_config.json
    grpo-rollout --model e1 --in "$(P)" -k 2 --max-new-tokens 16 --seed 5 --weights f32 --out e.jsonl
    check_lp e1 e.jsonl 1e-4
}

@test "gpt_oss: gate without up, and dropout on its experts, are 64 in one line; adapter files PEFT would not read are 65" {
    oss_tiny
    for t in gate up_proj q,gate,down; do
        run grpo-update --model oss --in "$(B)" --out l3 --lora-r 4 --lora-targets "$t"
        [ "$status" -eq 64 ]
        assert_one_line_error grpo-update "--lora-targets: gate and up are one parameter of gpt_oss's experts \(mlp.experts.gate_up_proj, one A for both\): name both or neither"
        [ ! -e l3 ]
    done
    run grpo-update --model oss --in "$(B)" --out l3 --lora-r 4 --lora-targets down --lora-dropout 0.1
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-update "--lora-dropout 0.1: PEFT's adapter on gpt_oss's stacked experts \(target_parameters\) has no dropout"
    [ ! -e l3 ]
    # on attention alone dropout stays; continuing an experts adapter with it is refused alike
    grpo-update --model oss --in "$(B)" --out l1 --lr 1e-2 --lora-r 4 --lora-dropout 0.1
    grpo-update --model oss --in "$(B)" --out x1 --lr 1e-2 --lora-r 4 --lora-targets gate,up
    run grpo-update --model x1 --in "$(B)" --out x2 --lora-dropout 0.1
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-update "--lora-dropout 0.1: PEFT's adapter on gpt_oss's stacked experts"
    [ ! -e x2 ]
    cases=(
        '.target_modules += ["down_proj"]|target_modules: gate_proj, up_proj and down_proj name no module of gpt_oss'
        '.target_parameters = ["model.layers.0.mlp.experts.gate_up_proj"]|target_parameters entry "model.layers.0.mlp.experts.gate_up_proj" is not supported'
        '.lora_dropout = 0.05|lora_dropout 0.05: PEFT.s adapter on gpt_oss.s stacked experts'
    )
    for c in "${cases[@]}"; do
        rm -rf bad && cp -r x1 bad
        jq "${c%%|*}" x1/adapter_config.json > bad/adapter_config.json
        run grpo-rollout --model bad --in "$(P)" -k 1 --max-new-tokens 4 --out r4.jsonl
        [ "$status" -eq 65 ]
        assert_one_line_error grpo-rollout "bad/adapter_config.json: ${c#*|}"
        [ ! -e r4.jsonl ]
    done
}

@test "gpt_oss: the PEFT package puts our adapter on gpt-oss's modules (ParamWrapper on the experts) and gives our logits; we read PEFT's" {
    py="${GRPO_PEFT_PY:-$GRPO_ROOT/.venv-peft/bin/python}"
    [ -x "$py" ] || skip "no transformers/PEFT venv (make venv)"
    v=$("$py" -c 'import peft; print(peft.__version__)')
    "$py" -c 'import sys, peft; sys.exit(tuple(int(x) for x in peft.__version__.split(".")[:2]) < (0, 17))' ||
        skip "peft $v in the PEFT venv: target_parameters came with 0.17 (make venv)"
    oss_tiny
    for t in all gate,up,down; do
        grpo-update --model oss --in "$(B)" --out "x-$t" --lr 1e-2 --lora-r 4 --lora-targets "$t"
        run "$py" "$GRPO_ROOT/tests/ref/peft_oss_logits.py" oss "x-$t" oss/tokens.txt peft.f32
        echo "$output"
        [ "$status" -eq 0 ]
        # (q, k, v, o and) gate_up_proj's and down_proj's wrappers in 2 layers, A and B each
        n=8
        [ "$t" = gate,up,down ] || n=24
        [[ "$output" == *"peft: lora tensors $n of $n in the file"* ]]
        GRPO_MODEL_DIR="x-$t" GRPO_MODEL_TOKENS=oss/tokens.txt GRPO_MODEL_OUT=ours.f32 run -0 "$GRPO_ROOT/build/tests/test_model"
        # our float32 against PEFT's float64 forward, its adapter unmerged and merged (measured 2e-6);
        # the adapter moved the logits by far more
        "$GRPO_PY" -c "
import sys, numpy as np
o = np.fromfile('ours.f32', '<f4')
d = [float(np.max(np.abs(np.fromfile(f, '<f4') - o))) for f in ('peft.f32', 'peft.f32.merged', 'peft.f32.base')]
print('max abs diff: peft', d[0], 'merged', d[1], 'base', d[2])
sys.exit(0 if d[0] <= 1e-4 and d[1] <= 1e-4 and d[2] > 1e-2 else 1)"
    done
    # and the other way: an adapter PEFT made and saved (its tokenizer beside it, as a user saves
    # one) rolls out within 1e-4 of the reference's merge and gives PEFT's logits (measured 3.8e-6),
    # and trains on
    run "$py" "$GRPO_ROOT/tests/ref/peft_oss_logits.py" --write "$PWD/oss" pw
    echo "$output"
    [ "$status" -eq 0 ]
    cp oss/tokenizer.json oss/tokenizer_config.json pw/
    grpo-rollout --model pw --in "$(P)" -k 2 --max-new-tokens 16 --seed 5 --weights f32 --out pw.jsonl
    check_lp pw pw.jsonl 1e-4
    run -0 "$py" "$GRPO_ROOT/tests/ref/peft_oss_logits.py" oss pw oss/tokens.txt peft.f32
    GRPO_MODEL_DIR=pw GRPO_MODEL_TOKENS=oss/tokens.txt GRPO_MODEL_OUT=ours.f32 run -0 "$GRPO_ROOT/build/tests/test_model"
    "$GRPO_PY" -c "
import sys, numpy as np
d = float(np.max(np.abs(np.fromfile('peft.f32', '<f4') - np.fromfile('ours.f32', '<f4'))))
print('max abs diff', d)
sys.exit(0 if d <= 1e-4 else 1)"
    grpo-update --model pw --in "$(B)" --out pw1 --lr 1e-2
    jq -e '.step == 1' pw1/grpo/state.json
    jq -e '.target_parameters == ["mlp.experts.gate_up_proj","mlp.experts.down_proj"]' pw1/adapter_config.json
}

@test "gpt_oss: full fine-tuning writes the stacked experts as HF does, per-expert moments, resumes, rolls out" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny gpt_oss oss
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" oss
    grpo-update --model oss --in "$(B)" --out c1 --lr 1e-3
    "$GRPO_PY" - oss c1 <<'PY'
import sys
from safetensors.numpy import load_file
a, b = (load_file(d + "/model.safetensors") for d in sys.argv[1:3])
o = load_file(sys.argv[2] + "/grpo/optimizer.safetensors")
assert set(a) == set(b), set(a) ^ set(b)
for n in a:
    assert a[n].shape == b[n].shape, (n, a[n].shape, b[n].shape)
# every stacked tensor moved, each expert's gate (even columns) and up (odd) both
for n in ("model.layers.0.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj",
          "model.layers.0.mlp.experts.gate_up_proj_bias", "model.layers.1.mlp.experts.down_proj_bias"):
    d = abs(a[n].astype("float64") - b[n].astype("float64"))
    assert d.max() > 0, n
for x in range(a["model.layers.0.mlp.experts.gate_up_proj"].shape[0]):
    d = abs(a["model.layers.0.mlp.experts.gate_up_proj"][x] - b["model.layers.0.mlp.experts.gate_up_proj"][x])
    assert d[:, 0::2].max() > 0 and d[:, 1::2].max() > 0, x
# moments: one pair per expert's own matrix and bias
assert "exp_avg.model.layers.1.mlp.experts.3.up_proj.weight" in o
assert "exp_avg_sq.model.layers.0.mlp.experts.0.gate_proj.bias" in o
assert not any(k.endswith("gate_up_proj") for k in o)
PY
    # the written layout is HF's: the float64 reference reads c1 as it read oss
    grpo-rollout --model c1 --in "$(P)" -k 2 --max-new-tokens 16 --seed 5 --weights f32 --out r1.jsonl
    check_lp c1 r1.jsonl 1e-4
    grpo-rollout --model oss --in "$(P)" -k 2 --max-new-tokens 16 --seed 5 --weights f32 --out r0.jsonl
    run cmp -s <(jq -c .logprobs r0.jsonl) <(jq -c .logprobs r1.jsonl)
    [ "$status" -eq 1 ]
    grpo-update --model c1 --in "$(B)" --out c2 --lr 1e-3
    jq -e '.step == 2' c2/grpo/state.json
}

@test "--router-aux-coef: the balance loss in the metrics and state.json; off by default; a dense model is 64" {
    needs_moe
    grpo-update --model "$MOE" --in "$(B)" --out c1 --lr 1e-3 --router-aux-coef 0.01 --metrics m1.jsonl
    # E sum_x f_x P_x: k (2) when the routing is uniform, at most E k
    jq -e '."moe/balance_loss" > 1 and ."moe/balance_loss" < 16' m1.jsonl
    jq -e '.flags.router_aux_coef == 0.01' c1/grpo/state.json
    grpo-update --model "$MOE" --in "$(B)" --out c0 --lr 1e-3 --metrics m0.jsonl
    jq -e '."moe/balance_loss" == null' m0.jsonl
    # the router's step differs with it
    run cmp -s c0/model.safetensors c1/model.safetensors
    [ "$status" -eq 1 ]
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama dense
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" dense
    run grpo-update --model dense --in "$(B)" --out c2 --router-aux-coef 0.01
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--router-aux-coef 0.01: dense has no router"
    [ ! -e c2 ]
    run grpo-update --model "$MOE" --in "$(B)" --out c3 --router-aux-coef -1
    [ "$status" -eq 64 ]; assert_one_line_error grpo-update "--router-aux-coef"
}

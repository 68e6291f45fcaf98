#!/usr/bin/env bats
# The training math (lib/train/loss, optim, state) against independent
# references, through the unit tests' driver modes:
#   - the GRPO loss family and its gradient, single- and multi-turn records
#     (completion_mask): torch float64 autograd
#     (tests/ref/loss_ref.py; loss 1e-12 relative, dlogp 1e-6 relative);
#   - AdamW/SGD steps, clip_grad_norm_ and the lr schedules: torch.optim and
#     transformers' formulas (tests/ref/optim_ref.py; 1e-6 relative);
#   - the state files read by Python's json and safetensors packages.
# needs: venv
load helpers

LOSS_BIN="$GRPO_ROOT/build/tests/test_loss"
OPTIM_BIN="$GRPO_ROOT/build/tests/test_optim"
STATE_BIN="$GRPO_ROOT/build/tests/test_state"

need() {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    [ -x "$1" ] || skip "$1 not built (make unit)"
}

@test "loss: every kind x token/sequence x beta matches torch autograd" {
    need "$LOSS_BIN"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/loss_ref.py" --bin "$LOSS_BIN"
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "loss: a second seed, more cases" {
    need "$LOSS_BIN"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/loss_ref.py" --bin "$LOSS_BIN" --seed 7 --cases 12
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "loss: the driver under ASan agrees too" {
    need "$GRPO_ROOT/build/tests-asan/test_loss"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/loss_ref.py" --bin "$GRPO_ROOT/build/tests-asan/test_loss" --cases 2
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "optimizer: AdamW/SGD steps, clipping and schedules match torch and transformers' formulas" {
    need "$OPTIM_BIN"
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/optim_ref.py" --bin "$OPTIM_BIN"
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "state files: Python's json and safetensors read what we write" {
    need "$STATE_BIN"
    "$STATE_BIN" --write-sample "$T"
    run "$GRPO_PY" - "$T" <<'EOF'
import json, sys
import numpy as np
from safetensors import safe_open

d = sys.argv[1]
with open(f"{d}/state.json", encoding="utf-8") as f:
    s = json.load(f)
assert s["step"] == 42 and s["rng"] == {"seed": 10**18, "next_index": 43}, s
assert s["schedule"] == {"name": "cosine", "step": 42, "warmup_steps": 5, "total_steps": 100}, s
assert s["flags"]["optimizer"] == "adamw" and s["flags"]["lr"] == 1e-6, s
assert s["parent"] == 'runs/ckpt-0041 "q" \u00e9' and s["version"] == "0.1.0", s
assert len(s["batch_sha256"]) == 64

with safe_open(f"{d}/optimizer.safetensors", framework="numpy") as f:
    assert f.metadata() == {"format": "grpo", "optimizer": "adamw"}, f.metadata()
    w, b = "model.layers.0.mlp.up_proj.weight", "model.layers.0.self_attn.q_proj.bias"
    assert list(f.keys()) == sorted([f"exp_avg.{w}", f"exp_avg_sq.{w}", f"exp_avg.{b}", f"exp_avg_sq.{b}"])
    i = np.arange(15, dtype=np.float32)
    m = f.get_tensor(f"exp_avg.{w}")
    assert m.dtype == np.float32 and m.shape == (3, 5), (m.dtype, m.shape)
    assert np.array_equal(m.ravel(), np.float32(1) + np.float32(0.25) * i - np.float32(1.5))
    v = f.get_tensor(f"exp_avg_sq.{w}")
    assert np.allclose(v.ravel(), 1e-3 + 1e-4 * (i + 1), rtol=1e-6, atol=0)
    assert f.get_tensor(f"exp_avg.{b}").shape == (4,)
print("state.json and optimizer.safetensors read back")
EOF
    echo "$output"
    [ "$status" -eq 0 ]
}

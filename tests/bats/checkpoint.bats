#!/usr/bin/env bats
# Checkpoints as the tools load them: the paths a checkpoint records (its
# adapter's base, a full fine-tune's reference) resolve from any directory and
# after the run directory moves; weights and logits that are not finite stop
# a tool with 65 instead of rolling out garbage.
# needs: venv models
load helpers

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    make_tiny_llama "$TINY"
    [ -x "$GRPO_PY" ] || return 0
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch "$BATS_FILE_TMPDIR/batch.jsonl" 16 97
}

needs_tiny() { [ -d "$TINY" ] || skip "no test venv (make venv)"; }
B() { echo "$BATS_FILE_TMPDIR/batch.jsonl"; }
prompt() { echo '{"id":"p","prompt_tokens":[1,4,5,6,7,2,4,1]}'; }

# set_tensor DIR NAME PYEXPR: rewrites tensor NAME of DIR/model.safetensors
# as PYEXPR of t (the tensor, torch).
set_tensor() {
    "$GRPO_PY" - "$1/model.safetensors" "$2" "$3" <<'PY'
import sys, torch
from safetensors.torch import load_file, save_file
path, name, expr = sys.argv[1:]
ts = load_file(path)
t = ts[name]
ts[name] = eval(expr).contiguous()
save_file(ts, path, metadata={"format": "pt"})
PY
}

# ---- recorded paths -----------------------------------------------------------------------------

# run_dir DIR: DIR/models/tiny and an adapter checkpoint DIR/ckpt-1 made from
# inside DIR, so that the checkpoint names its base as "models/tiny".
run_dir() {
    mkdir -p "$1/models" && cp -r "$TINY" "$1/models/tiny"
    (cd "$1" && grpo-update --model models/tiny --in "$(B)" --out ckpt-1 --lora-r 4 --lr 1e-2 2> /dev/null)
}

@test "an adapter checkpoint records its base relative to itself and absolutely" {
    needs_tiny
    run_dir run
    jq -e --arg a "$PWD/run/models/tiny" '.base_model_name_or_path == $a' run/ckpt-1/adapter_config.json
    jq -e --arg a "$PWD/run/models/tiny" '.paths == {"base_model": {"relative": "../models/tiny", "absolute": $a}}
        and .parent == "models/tiny" and .flags.ref == null' run/ckpt-1/grpo/state.json
    # continued elsewhere: each checkpoint's relative path is its own
    mkdir run/sub
    (cd run && grpo-update --model ckpt-1 --in "$(B)" --out sub/ckpt-2 2> /dev/null)
    jq -e '.paths.base_model.relative == "../../models/tiny" and .parent == "ckpt-1"' run/sub/ckpt-2/grpo/state.json
    # the same run elsewhere on the same base: the same bytes but for where the base is from there
    mkdir -p again/x && ln -s "$PWD/run/models" again/x/models
    (cd again/x && grpo-update --model models/tiny --in "$(B)" --out ckpt-1 --lora-r 4 --lr 1e-2 2> /dev/null)
    diff -r -x state.json run/ckpt-1 again/x/ckpt-1
    diff <(jq -c 'del(.paths)' run/ckpt-1/grpo/state.json) <(jq -c 'del(.paths)' again/x/ckpt-1/grpo/state.json)
    jq -e '.paths.base_model.relative == "../../../run/models/tiny"' again/x/ckpt-1/grpo/state.json
}

@test "an adapter checkpoint used by absolute path from another directory" {
    needs_tiny
    run_dir run
    prompt > p.jsonl
    (cd run && grpo-rollout --model ckpt-1 -k 2 --max-new-tokens 4 --in ../p.jsonl --out ../want.jsonl)
    mkdir elsewhere && cd elsewhere
    run -0 grpo-rollout --model "$T/run/ckpt-1" -k 2 --max-new-tokens 4 --in ../p.jsonl --out got.jsonl
    cmp ../want.jsonl got.jsonl
    run -0 grpo-export --model "$T/run/ckpt-1" --format hf --out hf
}

@test "the run directory moved as a whole: the relative path; the checkpoint moved alone: the absolute one" {
    needs_tiny
    run_dir run
    prompt > p.jsonl
    grpo-rollout --model run/ckpt-1 -k 2 --max-new-tokens 4 --in p.jsonl --out want.jsonl
    mv run moved
    run -0 grpo-rollout --model moved/ckpt-1 -k 2 --max-new-tokens 4 --in p.jsonl --out got.jsonl
    cmp want.jsonl got.jsonl
    # and continues training there
    run -0 grpo-update --model moved/ckpt-1 --in "$(B)" --out moved/ckpt-2
    mv moved run
    mv run/ckpt-1 alone
    run -0 grpo-rollout --model alone --policy ckpt-1 -k 2 --max-new-tokens 4 --in p.jsonl --out got2.jsonl
    cmp want.jsonl got2.jsonl
}

@test "a base found nowhere: 66, one line naming the checkpoint, the fields and every path tried" {
    needs_tiny
    run_dir run
    mv run moved && mv moved/models moved/gone
    run -66 grpo-rollout --model moved/ckpt-1 -k 1 --in <(prompt)
    assert_one_line_error grpo-rollout "^grpo-rollout: moved/ckpt-1: base model \"$T/run/models/tiny\" not found \(grpo/state.json paths.base_model, adapter_config.json base_model_name_or_path\); tried moved/ckpt-1/../models/tiny, $T/run/models/tiny$"
    run -66 grpo-export --model moved/ckpt-1 --format peft --out o
    [[ "$output" == *"tried moved/ckpt-1/../models/tiny, $T/run/models/tiny" ]]
}

@test "a checkpoint written before paths were recorded: its base as stored, from the checkpoint or the current directory" {
    needs_tiny
    run_dir run
    jq -c 'del(.paths)' run/ckpt-1/grpo/state.json > s && mv s run/ckpt-1/grpo/state.json
    jq '.base_model_name_or_path = "models/tiny"' run/ckpt-1/adapter_config.json > c && mv c run/ckpt-1/adapter_config.json
    prompt > p.jsonl
    (cd run && grpo-rollout --model ckpt-1 -k 1 --max-new-tokens 2 --in ../p.jsonl > /dev/null)
    run -66 grpo-rollout --model run/ckpt-1 -k 1 --in p.jsonl
    assert_one_line_error grpo-rollout "run/ckpt-1: base model \"models/tiny\" not found \(adapter_config.json base_model_name_or_path; a Hub id must be downloaded and named by path\); tried run/ckpt-1/models/tiny, models/tiny$"
}

@test "a full fine-tune's KL reference resolves after the run directory moves; found nowhere it is 66 naming the paths" {
    needs_tiny
    mkdir -p run/models && cp -r "$TINY" run/models/tiny
    (cd run && grpo-update --model models/tiny --in "$(B)" --out c1 --beta 0.04 2> /dev/null)
    jq -e --arg a "$PWD/run/models/tiny" '.flags.ref == $a and .paths.ref == {"relative": "../models/tiny", "absolute": $a}' \
        run/c1/grpo/state.json
    mv run moved
    run -0 grpo-update --model moved/c1 --in "$(B)" --out moved/c2 --beta 0.04
    jq -e --arg a "$PWD/moved/models/tiny" '.flags.ref == $a and .paths.ref.relative == "../models/tiny"' moved/c2/grpo/state.json
    mv moved/models moved/gone
    run -66 grpo-update --model moved/c2 --in "$(B)" --out c3 --beta 0.04
    assert_one_line_error grpo-update "moved/c2: reference model \"$PWD/moved/models/tiny\" not found \(grpo/state.json flags.ref, paths.ref\); tried moved/c2/../models/tiny, $PWD/moved/models/tiny$"
    [ ! -e c3 ]
    # without the KL term the reference is not needed, and is carried on as stored
    run -0 grpo-update --model moved/c2 --in "$(B)" --out c3 --beta 0
    jq -e --arg a "$PWD/moved/models/tiny" '.flags.ref == $a and (.paths | has("ref") | not)' c3/grpo/state.json
}

# ---- non-finite weights and logits -------------------------------------------------------------

@test "a NaN or inf weight: loading fails 65 naming the file, the tensor and the value" {
    needs_tiny
    cp -r "$TINY" nan
    set_tensor nan model.layers.1.mlp.up_proj.weight 't.index_put((torch.tensor([3]), torch.tensor([5])), torch.tensor(float("nan")))'
    run -65 grpo-rollout --model nan -k 1 --max-new-tokens 2 --in <(prompt) --out o.jsonl
    assert_one_line_error grpo-rollout "^grpo-rollout: nan/model.safetensors: tensor 'model.layers.1.mlp.up_proj.weight': value 197 is NaN"
    [ ! -e o.jsonl ]
    # bf16 on disk: caught as it is widened; -inf named as such
    cp -r "$TINY" inf
    set_tensor inf model.embed_tokens.weight 't.to(torch.bfloat16).index_put((torch.tensor([0]), torch.tensor([0])), torch.tensor(float("-inf"), dtype=torch.bfloat16))'
    run -65 grpo-update --model inf --in "$(B)" --out c
    assert_one_line_error grpo-update "inf/model.safetensors: tensor 'model.embed_tokens.weight': value 0 is -inf"
    [ ! -e c ]
    run -65 grpo-export --model inf --format gguf --out x.gguf
    [ ! -e x.gguf ]
}

@test "a NaN in an adapter's factors: 65 naming the adapter file and tensor" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out ad --lora-r 4 2> /dev/null
    "$GRPO_PY" - ad/adapter_model.safetensors <<'PY'
import sys
from safetensors.torch import load_file, save_file
ts = load_file(sys.argv[1])
ts["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"][1, 2] = float("inf")
save_file(ts, sys.argv[1], metadata={"format": "pt"})
PY
    run -65 grpo-rollout --model ad -k 1 --max-new-tokens 2 --in <(prompt)
    assert_one_line_error grpo-rollout "ad/adapter_model.safetensors: tensor 'base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight': value 6 is \+inf"
}

@test "a GGUF with a NaN weight: 65 naming the file and the tensor" {
    needs_tiny
    cp -r "$TINY" nan
    set_tensor nan model.layers.0.self_attn.v_proj.weight 't * float("nan")'
    # our exporter refuses to load it; write the GGUF from a good model and poison it with gguf-py
    grpo-export --model "$TINY" --format gguf --dtype f32 --out good.gguf
    "$GRPO_PY" - good.gguf <<'PY'
import sys, numpy as np
from gguf import GGUFReader
r = GGUFReader(sys.argv[1], "r+")
t = next(t for t in r.tensors if t.name == "blk.0.attn_v.weight")
t.data.reshape(-1)[7] = np.nan
PY
    run -65 grpo-rollout --model good.gguf -k 1 --max-new-tokens 2 --in <(prompt)
    assert_one_line_error grpo-rollout "good.gguf: tensor 'blk.0.attn_v.weight': value 7 is NaN"
}

@test "finite weights whose logits overflow to infinity: rollout exits 65 naming the checkpoint, writes nothing" {
    needs_tiny
    cp -r "$TINY" big
    # every weight finite (3e38 < FLT_MAX), every logit a sum of them: +-inf
    set_tensor big lm_head.weight 'torch.full_like(t, 3e38)'
    for T in 0 1; do
        run -65 grpo-rollout --model big -k 2 --max-new-tokens 4 --temperature $T --in <(prompt) --out o.jsonl
        assert_one_line_error grpo-rollout "^grpo-rollout: big: the model's logits are not finite \(NaN or infinity\) at record \"p\", sample 0, completion token 0"
        [ ! -e o.jsonl ]
    done
    # the same model with finite logits rolls out (the check is not the cause)
    set_tensor big lm_head.weight 'torch.full_like(t, 1.0)'
    run -0 grpo-rollout --model big -k 2 --max-new-tokens 4 --in <(prompt) --out o.jsonl
    [ "$(wc -l < o.jsonl)" -eq 2 ]
}

# ---- the training state: grpo/optimizer.safetensors and grpo/state.json --------------------------

# set_moment FILE NAME PYEXPR: rewrites moment NAME of an optimizer file as
# PYEXPR of t (torch), keeping its metadata.
set_moment() {
    "$GRPO_PY" - "$@" <<'PY'
import sys, torch
from safetensors import safe_open
from safetensors.torch import save_file
path, name, expr = sys.argv[1:]
with safe_open(path, "pt") as f:
    meta = f.metadata()
    ts = {k: f.get_tensor(k) for k in f.keys()}
t = ts[name]
ts[name] = eval(expr).contiguous()
save_file(ts, path, metadata=meta)
PY
}

@test "a NaN or a negative second moment in the optimizer state: resuming is 65 naming file, tensor, index" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out c1 2> /dev/null
    cp -r c1 nan
    set_moment nan/grpo/optimizer.safetensors exp_avg.model.layers.0.mlp.up_proj.weight \
        't.index_put((torch.tensor([1]), torch.tensor([2])), torch.tensor(float("nan")))'
    run -65 grpo-update --model nan --in "$(B)" --out c2
    assert_one_line_error grpo-update "nan/grpo/optimizer.safetensors: tensor \"exp_avg.model.layers.0.mlp.up_proj.weight\": value 66 is NaN \(non-finite optimizer state"
    [ ! -e c2 ]
    cp -r c1 neg
    set_moment neg/grpo/optimizer.safetensors exp_avg_sq.model.norm.weight 't.index_put((torch.tensor([5]),), torch.tensor(-1.0))'
    run -65 grpo-update --model neg --in "$(B)" --out c2
    assert_one_line_error grpo-update "tensor \"exp_avg_sq.model.norm.weight\": value 5 is -1 \(a second moment is never negative"
    [ ! -e c2 ]
}

@test "a step that makes a weight non-finite writes nothing and says so: 65, the older --out kept" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out c1 2> /dev/null
    cp -r c1 c2
    # finite moments whose update overflows: m / sqrt(v) beyond float
    set_moment c1/grpo/optimizer.safetensors exp_avg.model.layers.0.mlp.up_proj.weight 't.fill_(3e38)'
    run -65 grpo-update --model c1 --in "$(B)" --out c2
    assert_one_line_error grpo-update "step 2: tensor 'model.layers.0.mlp.up_proj.weight': value [0-9]+ is [-+]inf \(the step gave non-finite weights; nothing written\)"
    cmp c1/model.safetensors c2/model.safetensors
    no_temp_left .
}

@test "state.json there and optimizer.safetensors missing: 66 naming the file, not fresh moments" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out c1 2> /dev/null
    rm c1/grpo/optimizer.safetensors
    run -66 grpo-update --model c1 --in "$(B)" --out c2
    assert_one_line_error grpo-update "c1/grpo/optimizer.safetensors: cannot open: No such file or directory \(a checkpoint with grpo/state.json resumes"
    [ ! -e c2 ]
    # without state.json it is a model to start from: fresh moments
    rm c1/grpo/state.json
    grpo-update --model c1 --in "$(B)" --out c2 2> /dev/null
    [ "$(jq .step c2/grpo/state.json)" = 1 ]
}

@test "state.json a FIFO, a symlink loop, a dangling symlink or a directory: every tool that reads it fails naming it, at once" {
    needs_tiny
    grpo-update --model "$TINY" --in "$(B)" --out a1 --lora-r 4 2> /dev/null
    for kind in fifo loop dangling dir; do
        rm -rf x && cp -r a1 x && rm x/grpo/state.json
        case $kind in
            fifo) mkfifo x/grpo/state.json; want="not a regular file \(a FIFO\)" ;;
            loop) ln -s state.json x/grpo/state.json; want="cannot follow the symlink: Too many levels of symbolic links" ;;
            dangling) ln -s gone.json x/grpo/state.json; want="cannot follow the symlink: No such file" ;;
            dir) mkdir x/grpo/state.json; want="not a regular file \(a directory\)" ;;
        esac
        run -66 timeout 20 grpo-update --model x --in "$(B)" --out y
        assert_one_line_error grpo-update "^grpo-update: x/grpo/state.json: $want"
        [ ! -e y ]
        run -66 timeout 20 grpo-rollout --model x -k 1 --max-new-tokens 2 --in <(prompt) --out o.jsonl
        assert_one_line_error grpo-rollout "^grpo-rollout: x/grpo/state.json: $want"
        run -66 timeout 20 grpo-export --model x --format hf --out y
        assert_one_line_error grpo-export "x/grpo/state.json: $want"
        [ ! -e y ]
    done
}

@test "a model's file that is a FIFO or a directory: every tool that reads it fails naming it, never waiting on it" {
    needs_tiny
    local f kind want
    for f in config.json tokenizer.json tokenizer_config.json generation_config.json model.safetensors.index.json; do
        for kind in fifo dir; do
            rm -rf x && cp -r "$TINY" x && rm -f "x/$f"
            case $kind in
                fifo) mkfifo "x/$f"; want="not a regular file \(a FIFO\)" ;;
                dir) mkdir "x/$f"; want="not a regular file \(a directory\)" ;;
            esac
            run -66 timeout 20 grpo-rollout --model x -k 1 --max-new-tokens 2 --in <(prompt) --out o.jsonl
            assert_one_line_error grpo-rollout "^grpo-rollout: x/$f: $want"
            # (the tokenizer's files when grpo-update copies them into its checkpoint)
            run -66 timeout 20 grpo-update --model x --in "$(B)" --out y
            assert_one_line_error grpo-update "^grpo-update: x/$f: $want"
            [ ! -e y ]
            no_temp_left .
            run -66 timeout 20 grpo-export --model x --format gguf --out y.gguf
            assert_one_line_error grpo-export "x/$f: $want"
            [ ! -e y.gguf ]
            case $f in config.json | model.safetensors.index.json) continue ;; esac # grpo-prep reads the text side alone
            run -66 timeout 20 grpo-prep --task arith --n 1 --model x
            assert_one_line_error grpo-prep "^grpo-prep: x/$f: $want"
        done
    done
}

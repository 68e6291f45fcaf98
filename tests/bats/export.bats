#!/usr/bin/env bats
# grpo-export: Hugging Face directories (from an HF directory, a GGUF and an
# adapter checkpoint), PEFT adapters and a GGUF smoke test, checked with the
# safetensors / tokenizers / gguf packages (tests/ref/check_export.py), our
# loader's logits (build/tests/test_model in driver mode) and the float64
# PyTorch reference (tests/ref/model_ref.py); then every flag and failure.
# needs: venv models
load helpers

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny" SMOL="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    export LOGITS_BIN="$GRPO_ROOT/build/tests/test_model" HF_BIN="$GRPO_ROOT/build/tests/test_hf_dir"
    export GRPO_HF_TEST_BIN="$HF_BIN" GRPO_PEFT_PY="${GRPO_PEFT_PY:-$GRPO_ROOT/.venv-peft/bin/python}"
    [ -x "$GRPO_PY" ] || return 0
    # a tiny llama with a tokenizer: a complete Hugging Face directory
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny llama "$TINY"
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/make_tiny_tokenizer.py" "$TINY"
}

needs_tiny() {
    [ -d "$TINY" ] || skip "no test venv (make venv)"
    [ -x "$HF_BIN" ] && [ -x "$LOGITS_BIN" ] || skip "unit tests not built (make unit)"
}
needs_smol() { [ -f "$SMOL" ] || skip "no model (make models)"; }
needs_peft() { [ -x "$GRPO_PEFT_PY" ] || skip "no transformers/PEFT venv (make venv)"; }

# logits DIR OUT [TOKENS]: our logits of the model at DIR for TOKENS (default the tiny ones).
logits() {
    GRPO_MODEL_DIR="$1" GRPO_MODEL_TOKENS="${3:-$TINY/tokens.txt}" GRPO_MODEL_OUT="$2" run "$LOGITS_BIN"
    [ "$status" -eq 0 ] || { echo "$output"; return 1; }
}

# close A.f32 B.f32 TOL: two raw float32 logit files agree within TOL.
close() {
    "$GRPO_PY" -c "
import sys, numpy as np
a, b = np.fromfile('$1', '<f4'), np.fromfile('$2', '<f4')
d = float(np.max(np.abs(a - b))) if a.shape == b.shape else float('inf')
print('max abs diff', d)
sys.exit(0 if d <= $3 else 1)"
}

# check COMMAND ARGS...: check_export.py, TAP shown, success required.
check() {
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_export.py" "$@"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" != *"not ok"* ]]
}

# ---- Hugging Face directories ------------------------------------------------------------------

@test "hf from an HF directory, f32: same tensors, config and text files, bit-identical logits" {
    needs_tiny
    run grpo-export --model "$TINY" --format hf --dtype f32 --out out
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    [ "$(ls out | tr '\n' ' ')" = "config.json generation_config.json model.safetensors tokenizer.json tokenizer_config.json " ]
    check hf-dir out "$TINY" f32
    logits "$TINY" src.f32
    logits out out.f32
    cmp src.f32 out.f32
    no_temp_left .
}

@test "hf: a chat template kept in chat_template.jinja (as gpt-oss keeps it) is copied, and the tools read it" {
    needs_tiny
    cp -r "$TINY" src
    jq -r .chat_template "$TINY/tokenizer_config.json" > src/chat_template.jinja
    jq 'del(.chat_template)' "$TINY/tokenizer_config.json" > src/tokenizer_config.json
    grpo-export --model src --format hf --dtype f32 --out out
    cmp src/chat_template.jinja out/chat_template.jinja
    grpo-prep --task arith --n 2 --model "$TINY" --out want.jsonl
    grpo-prep --task arith --n 2 --model out --out got.jsonl
    cmp want.jsonl got.jsonl
}

@test "hf bf16 (the default): BF16 weights, logits match the float64 reference of those weights" {
    needs_tiny
    grpo-export --model "$TINY" --format hf --out out
    check hf-dir out "$TINY" bf16
    grep -q '"torch_dtype": "bfloat16"' out/config.json
    logits out ours.f32
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" logits out "$TINY/tokens.txt" ref.f64
    # 1e-4 as in model.bats: the reference reads the same bf16 weights
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare ours.f32 ref.f64 1e-4
    echo "$output"
    [ "$status" -eq 0 ]
    # against the f32 source: bf16 keeps 8 bits of each weight (relative
    # error <= 2^-9); through 2 layers the logits (|x| < ~6) move by ~1e-2
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" logits "$TINY" "$TINY/tokens.txt" src.f64
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare ours.f32 src.f64 0.1
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "hf f16 from a tied qwen3 with tokenizer.json alone: no lm_head, generation_config from config.json" {
    needs_tiny
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3 q3 --tied
    rm q3/generation_config.json
    cp "$TINY/tokenizer.json" q3/
    grpo-export --model q3 --format hf --dtype f16 --out out
    [ "$(ls out | tr '\n' ' ')" = "config.json generation_config.json model.safetensors tokenizer.json " ]
    check hf-dir out q3 f16
    "$GRPO_PY" -c "
from safetensors import safe_open
assert 'lm_head.weight' not in safe_open('out/model.safetensors', 'np').keys()"
    logits out ours.f32 q3/tokens.txt
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" logits out q3/tokens.txt ref.f64
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare ours.f32 ref.f64 1e-4
    echo "$output"
    [ "$status" -eq 0 ]
}

@test "hf from the SmolLM2 GGUF: weights are gguf-py's, f32 logits bit-identical, bf16 close, config reads back" {
    needs_tiny
    needs_smol
    smol_tokens toks.txt
    grpo-export --model "$SMOL" --format hf --dtype f32 --out f32
    check gguf-dir f32 "$SMOL" f32
    logits "$SMOL" gguf.f32 toks.txt
    logits f32 out.f32 toks.txt
    cmp gguf.f32 out.f32
    rm -r f32
    grpo-export --model "$SMOL" --format hf --out bf16
    check gguf-dir bf16 "$SMOL" bf16
    logits bf16 bf16.f32 toks.txt
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" logits bf16 toks.txt ref.f64
    # 1e-3 as model.bats allows 30 fp32 layers against float64
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare bf16.f32 ref.f64 1e-3
    echo "$output"
    [ "$status" -eq 0 ]
    # the text side: the tokenizer and chat template a GGUF-built directory gives
    [ "$(jq -r .chat_template bf16/tokenizer_config.json | head -c 40)" = "{% for message in messages %}{% if loop." ]
    jq -e '.architectures == ["LlamaForCausalLM"] and .hidden_size == 576 and .num_key_value_heads == 3
           and .rope_theta == 100000 and .rms_norm_eps == 1e-05 and .tie_word_embeddings and .vocab_size == 49152
           and .bos_token_id == 1 and .eos_token_id == 2' bf16/config.json
}

@test "a run started from the quantized GGUF exports its weights dequantized from it (README: Starting from a quantized GGUF)" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    needs_smol
    grep -A4 '^- \*\*Starting from a quantized GGUF\.\*\*' "$GRPO_ROOT/README.md" | grep -q 'dequantized from the GGUF'
    grep -A12 '^- \*\*Starting from a quantized GGUF' "$GRPO_ROOT/README.md" | grep -q "Hugging Face directory"
    # a LoRA step at learning rate 0 from the Q4_1 GGUF: the merged f32 export is the
    # GGUF's dequantized values exactly, every tensor
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/update_ref.py" make-batch b.jsonl 4 49152
    grpo-update --model "$SMOL" --in b.jsonl --out ck --lora-r 4 --lr 0 2> /dev/null
    grpo-export --model ck --format hf --dtype f32 --out hf
    check gguf-dir hf "$SMOL" f32
}

@test "transformers loads our hf exports with our logits (tiny llama, qwen2; SmolLM2 from its GGUF) and renders our prompts" {
    needs_tiny
    needs_smol
    needs_peft
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen2 q2
    cp "$TINY/tokenizer.json" q2/
    for m in "$TINY" q2; do
        rm -rf hf && grpo-export --model "$m" --format hf --dtype f32 --out hf
        "$GRPO_PEFT_PY" "$GRPO_ROOT/tests/ref/transformers_logits.py" hf - "$m/tokens.txt" tf.f32
        logits "$m" ours.f32 "$m/tokens.txt"
        close tf.f32 ours.f32 1e-4
    done
    jq -e '.architectures == ["Qwen2ForCausalLM"]' hf/config.json
    smol_tokens toks.txt
    rm -rf hf && grpo-export --model "$SMOL" --format hf --dtype f32 --out hf
    "$GRPO_PEFT_PY" "$GRPO_ROOT/tests/ref/transformers_logits.py" hf - toks.txt tf.f32
    logits "$SMOL" ours.f32 toks.txt
    # 1e-3 as model.bats allows 30 fp32 layers (measured 5.6e-5 on logits up to 36)
    close tf.f32 ours.f32 1e-3
    # the chat template and tokenizer built from GGUF metadata, through AutoTokenizer
    printf '%s\n' '{"messages":[{"role":"user","content":"What is 2+3?"}]}' \
        '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Name a colour. 日本語 ok?"}]}' \
        '{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"  spaces\n\ttabs"}]}' \
        > msgs.jsonl
    "$GRPO_PEFT_PY" "$GRPO_ROOT/tests/ref/transformers_logits.py" --chat hf msgs.jsonl > tf_ids.jsonl
    grpo-prep --task jsonl --model hf --in msgs.jsonl | jq -c .prompt_tokens > our_ids.jsonl
    [ "$(wc -l < our_ids.jsonl)" -eq 3 ]
    diff tf_ids.jsonl our_ids.jsonl
}

@test "tokenizer.json built from GGUF metadata: HF tokenizers gives our ids (smollm, gpt-2, llama-bpe, qwen2, gpt-4o)" {
    needs_tiny
    needs_smol
    check tokenizer "$T/tok"
}

# ---- adapters ----------------------------------------------------------------------------------

@test "peft: an adapter checkpoint's adapter alone, PEFT's layout, byte-identical to what it holds" {
    needs_tiny
    "$HF_BIN" --make-adapter "$TINY" ad 4 q,v,down 16
    grpo-export --model ad --format peft --out peft
    check peft peft "$TINY"
    cmp ad/adapter_model.safetensors peft/adapter_model.safetensors
    cmp ad/adapter_config.json peft/adapter_config.json
    grpo-export --model ad --format peft --dtype bf16 --out peft16
    check peft peft16 "$TINY" bf16
    no_temp_left .
}

@test "peft: the PEFT package puts our adapter on the base and gives our logits; its merge gives our merged export" {
    needs_tiny
    needs_peft
    "$HF_BIN" --make-adapter "$TINY" ad 4 q,k,v,o,gate,up,down 16
    # rsLoRA scales by alpha/sqrt(r): a second adapter, every other target, r 8
    "$HF_BIN" --make-adapter "$TINY" rs 8 q,v,down 8
    jq '.use_rslora = true' rs/adapter_config.json > c.json && mv c.json rs/adapter_config.json
    for a in ad rs; do
        grpo-export --model $a --format peft --out $a.peft
        run "$GRPO_PEFT_PY" "$GRPO_ROOT/tests/ref/transformers_logits.py" "$TINY" $a.peft "$TINY/tokens.txt" $a.peft.f32
        echo "$output"
        [ "$status" -eq 0 ]
        # PEFT read every adapter tensor (A and B of each target in 2 layers)
        n=$(jq '.target_modules | length' $a.peft/adapter_config.json)
        [[ "$output" == *"peft: lora tensors $((n * 2 * 2))"* ]]
        logits $a $a.f32
        grpo-export --model $a --format hf --dtype f32 --out $a.merged
        logits $a.merged $a.merged.f32
        # 1e-4: fp32 sums in other orders over 2 layers (measured about 2e-6)
        close $a.peft.f32 $a.f32 1e-4
        close $a.peft.f32.merged $a.merged.f32 1e-4
        # and the adapter did something: the base alone is far from it
        ! close $a.peft.f32.base $a.f32 0.05 || false
    done
}

@test "peft from a GGUF base: a note with the two commands; after them PEFT loads the adapter by itself, with our logits" {
    needs_tiny
    needs_peft
    grpo-export --model "$TINY" --format gguf --dtype f32 --out base.gguf
    "$HF_BIN" --make-adapter "$TINY" ad 4 q,k,v,o,gate,up,down 16
    jq --arg b "$PWD/base.gguf" '.base_model_name_or_path = $b' ad/adapter_config.json > c && mv c ad/adapter_config.json
    run -0 grpo-export --model ad --format peft --out plain
    assert_one_line_error grpo-export "^grpo-export: note: base_model_name_or_path is $PWD/base.gguf, a GGUF file, which PEFT cannot load; make a Hugging Face copy and name it: grpo-export --model $PWD/base.gguf --format hf --dtype f32 --out BASE_DIR, then grpo-export --model ad --format peft --base-model BASE_DIR --out plain$"
    jq -e --arg b "$PWD/base.gguf" '.base_model_name_or_path == $b' plain/adapter_config.json
    # the note's two commands
    grpo-export --model base.gguf --format hf --dtype f32 --out base-hf
    run -0 grpo-export --model ad --format peft --base-model base-hf --out ad.peft
    [ -z "$output" ]
    jq -e --arg b "$PWD/base-hf" '.base_model_name_or_path == $b' ad.peft/adapter_config.json
    cmp plain/adapter_model.safetensors ad.peft/adapter_model.safetensors
    # PEFT given the adapter alone, from another directory, finds the base and gives our logits
    mkdir elsewhere
    run bash -c "cd elsewhere && '$GRPO_PEFT_PY' '$GRPO_ROOT/tests/ref/transformers_logits.py' --auto '$T/ad.peft' '$TINY/tokens.txt' '$T/peft.f32'"
    echo "$output"
    [ "$status" -eq 0 ]
    [[ "$output" == *"peft: base $T/base-hf"* && "$output" == *"peft: lora tensors 28"* ]]
    logits ad ours.f32
    close peft.f32 ours.f32 1e-4
    logits "$TINY" base.f32
    ! close peft.f32 base.f32 0.05 || false
}

@test "peft --base-model: an HF directory written absolute, a Hub id as given; bad values 64/65/66, nothing written" {
    needs_tiny
    "$HF_BIN" --make-adapter "$TINY" ad 4 q,v 16
    cp -r "$TINY" sub-base
    run -0 grpo-export --model ad --format peft --base-model ./sub-base/ --out o1
    [ -z "$output" ]
    jq -e --arg b "$PWD/sub-base" '.base_model_name_or_path == $b' o1/adapter_config.json
    # without the flag, an HF base: its absolute path, no note
    run -0 grpo-export --model ad --format peft --out o2
    [ -z "$output" ]
    jq -e --arg b "$TINY" '.base_model_name_or_path == $b' o2/adapter_config.json
    run -0 grpo-export --model ad --format peft --base-model HuggingFaceTB/SmolLM2-135M-Instruct --out o3
    assert_one_line_error grpo-export "note: --base-model HuggingFaceTB/SmolLM2-135M-Instruct is no directory here: written as a Hub id"
    jq -e '.base_model_name_or_path == "HuggingFaceTB/SmolLM2-135M-Instruct"' o3/adapter_config.json
    # a path to nothing, a file, a directory that is no model, another shape, another format
    run -66 grpo-export --model ad --format peft --base-model ./nothing --out x
    assert_one_line_error grpo-export "--base-model ./nothing: no such directory, and not a Hub id"
    run -66 grpo-export --model ad --format peft --base-model /no/such/dir --out x
    run -64 grpo-export --model ad --format peft --base-model "$TINY/model.safetensors" --out x
    assert_one_line_error grpo-export "not a Hugging Face model directory \(config.json\)"
    mkdir empty
    run -64 grpo-export --model ad --format peft --base-model empty --out x
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" make-tiny qwen3 q3
    run -65 grpo-export --model ad --format peft --base-model q3 --out x
    assert_one_line_error grpo-export "--base-model q3: not the adapter's base \(hidden 64, intermediate 96, layers 2, heads 4/2 of 24, vocab 97; the adapter.s: 64, 96, 2, 4/2 of 16, 97\\)"
    run -64 grpo-export --model ad --format hf --base-model sub-base --out x
    assert_one_line_error grpo-export "--base-model: only --format peft names a base model"
    [ ! -e x ]
    no_temp_left .
}

@test "hf from an adapter checkpoint: LoRA merged, logits equal the reference merge; rollout takes it" {
    needs_tiny
    # the adapter at sub/ad names its base "../tiny": not there from the
    # current directory, so it is resolved relative to the adapter directory
    mkdir -p sub/x && cp -r "$TINY" sub/tiny
    (cd sub/x && "$HF_BIN" --make-adapter ../tiny ../ad)
    jq -e '.base_model_name_or_path == "../tiny"' sub/ad/adapter_config.json
    [ ! -e ../tiny ]
    grpo-export --model sub/ad --format hf --dtype f32 --out merged
    # a PEFT adapter directory carries no config or tokenizer: the base's are used
    cmp "$TINY/tokenizer.json" merged/tokenizer.json
    jq -e '.torch_dtype == "float32"' merged/config.json
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/check_export.py" merged-logits "$TINY" sub/ad "$TINY/tokens.txt" ref.f64
    logits merged merged.f32
    run "$GRPO_PY" "$GRPO_ROOT/tests/ref/model_ref.py" compare merged.f32 ref.f64 1e-4
    echo "$output"
    [ "$status" -eq 0 ]
    # the adapter changes the model, and model_load merges it the same way
    # (up to the OpenBLAS kernels: grpo-export runs the CPU's fastest, as
    # grpo-rollout does, test_model the library's default; 1e-5 is a few
    # float32 ulps of these logits)
    logits "$TINY" base.f32
    run close base.f32 merged.f32 1e-3
    [ "$status" -ne 0 ]
    logits sub/ad direct.f32
    close merged.f32 direct.f32 1e-5
    # grpo-rollout on the adapter checkpoint (with its tokenizer, as grpo-update
    # writes it) = on the merged export, to the bit: same kernels, same merge
    cp "$TINY"/tokenizer*.json "$TINY"/config.json sub/ad/
    echo '{"id":"p","prompt_tokens":[1,4,5,6,7,2,4,1]}' > p.jsonl
    grpo-rollout --model sub/ad --policy p -k 2 --max-new-tokens 8 --temperature 0 --in p.jsonl --out a.jsonl
    grpo-rollout --model merged --policy p -k 2 --max-new-tokens 8 --temperature 0 --in p.jsonl --out b.jsonl
    cmp a.jsonl b.jsonl
}

# ---- GGUF ----------------------------------------------------------------------------------------

@test "gguf: a merged adapter checkpoint as GGUF loads back with the same logits (smoke)" {
    needs_tiny
    grep -q 'gguf_export(' "$GRPO_ROOT/lib/export/gguf_export.c" 2>/dev/null || skip "gguf_export is not implemented yet"
    "$HF_BIN" --make-adapter "$TINY" ad
    run grpo-export --model ad --format gguf --dtype f32 --out m.gguf
    echo "$output"
    [ "$status" -eq 0 ]
    "$GRPO_PY" -c "
from gguf import GGUFReader
r = GGUFReader('m.gguf')
assert bytes(r.fields['general.architecture'].parts[-1]).decode() == 'llama'
assert 'tokenizer.ggml.tokens' in r.fields"
    grpo-export --model ad --format hf --dtype f32 --out merged
    logits merged hf.f32
    logits m.gguf gguf.f32
    # f32 weights and an exact Q/K row permutation there and back: the same bits
    cmp hf.f32 gguf.f32
    # the default dtype is f16
    grpo-export --model "$TINY" --format gguf --out d.gguf
    "$GRPO_PY" -c "
from gguf import GGUFReader
r = GGUFReader('d.gguf')
t = {t.name: t.tensor_type.name for t in r.tensors}
assert t['blk.0.attn_q.weight'] == 'F16' and t['blk.0.attn_norm.weight'] == 'F32', t"
    grpo-export --model "$TINY" --format gguf --dtype q8_0 --out q.gguf
    "$GRPO_PY" -c "
from gguf import GGUFReader
t = {t.name: t.tensor_type.name for t in GGUFReader('q.gguf').tensors}
assert t['blk.1.ffn_down.weight'] == 'Q8_0' and t['output_norm.weight'] == 'F32', t"
    no_temp_left .
}

# ---- flags and failures ----------------------------------------------------------------------------

@test "--help lists every flag and the defaults; --version" {
    run grpo-export --help
    [ "$status" -eq 0 ]
    for f in --model --format --out --dtype --base-model --clamp --progress; do [[ "$output" == *"$f"* ]]; done
    [[ "$output" == *"bf16 for hf, f32 for peft, f16 for gguf"* ]]
    [[ "$output" == *"exit status"* ]]
    [[ "$output" == *"(default: auto)"* ]]
    run grpo-export --version
    [ "$status" -eq 0 ]
    [[ "$output" == *"$(cat "$GRPO_ROOT/VERSION")"* ]]
}

@test "--progress: loading, then the tensors written, on stderr; stdout clean; quiet without it" {
    needs_tiny
    local f
    for f in hf gguf; do
        grpo-export --model "$TINY" --format $f --dtype f32 --out "x.$f" --progress > out 2> err
        [ ! -s out ]
        tr '\r' '\n' < err > lines
        grep -q "^grpo-export loading $TINY [0-9.]*s" lines
        # every tensor of the tiny llama (21 with the tied head left out of hf, 21 in gguf)
        n=$(grep -c "^grpo-export writing x.$f \[#*\] 21/21 tensors" lines)
        [ "$n" -ge 1 ] || { cat lines; false; }
        # and without a terminal, without --progress: nothing on stderr
        grpo-export --model "$TINY" --format $f --dtype f32 --out "y.$f" 2> quiet.err
        [ ! -s quiet.err ]
        if [ $f = hf ]; then cmp x.hf/model.safetensors y.hf/model.safetensors; else cmp x.gguf y.gguf; fi
    done
}

@test "missing --model, --format or --out: usage error 64" {
    run grpo-export --format hf --out o
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-export "--model is required"
    run grpo-export --model m --out o
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-export "--format is required"
    run grpo-export --model m --format hf
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-export "--out is required"
    [ ! -e o ]
}

@test "unknown --format and bad --dtype: usage error 64" {
    run grpo-export --model m --format onnx --out o
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-export "format"
    run grpo-export --model m --format hf --dtype f64 --out o
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-export "dtype"
    run grpo-export --model m --format hf --bogus 1 --out o
    [ "$status" -eq 64 ]
    [ ! -e o ]
}

@test "q8_0 with hf or peft: usage error 64, nothing written" {
    needs_tiny
    run grpo-export --model "$TINY" --format hf --dtype q8_0 --out o
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-export "--dtype q8_0: not a Hugging Face dtype"
    run grpo-export --model "$TINY" --format peft --dtype q8_0 --out o
    [ "$status" -eq 64 ]
    assert_one_line_error grpo-export "q8_0"
    [ ! -e o ]
    no_temp_left .
}

@test "a missing model: 66" {
    run grpo-export --model nowhere --format hf --out o
    [ "$status" -eq 66 ]
    assert_one_line_error grpo-export "nowhere"
    run grpo-export --model nowhere.gguf --format gguf --out o.gguf
    [ "$status" -eq 66 ]
    [ ! -e o ]
    [ ! -e o.gguf ]
}

@test "peft of a model without an adapter: 65 with a clear message" {
    needs_tiny
    run grpo-export --model "$TINY" --format peft --out o
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-export "--format peft needs an adapter checkpoint.*use --format hf"
    [ ! -e o ]
}

@test "an adapter whose base is missing or that does not fit it: 66 / 65 naming the cause" {
    needs_tiny
    "$HF_BIN" --make-adapter "$TINY" ad
    sed -i 's|"base_model_name_or_path": "[^"]*"|"base_model_name_or_path": "org/not-here"|' ad/adapter_config.json
    run grpo-export --model ad --format hf --out o
    [ "$status" -eq 66 ]
    assert_one_line_error grpo-export 'base model "org/not-here" not found'
    "$HF_BIN" --make-adapter "$TINY" ad2
    sed -i 's|"use_dora": false|"use_dora": true|' ad2/adapter_config.json
    run grpo-export --model ad2 --format peft --out o
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-export 'use_dora'
    [ ! -e o ]
}

@test "hf, like gguf, refuses a missing tokenizer.json (66) or one that does not load (65), naming it; nothing written" {
    needs_tiny
    cp -r "$TINY" nt && rm nt/tokenizer.json
    cp -r "$TINY" gt && echo 'garbage{' > gt/tokenizer.json
    cp -r "$TINY" gc && echo 'garbage{' > gc/tokenizer_config.json
    local f
    for f in hf gguf; do
        run grpo-export --model nt --format $f --out "o.$f"
        [ "$status" -eq 66 ]
        assert_one_line_error grpo-export "nt/tokenizer.json: cannot open"
        run grpo-export --model gt --format $f --out "o.$f"
        [ "$status" -eq 65 ]
        assert_one_line_error grpo-export "gt/tokenizer.json: "
        [ ! -e "o.$f" ]
        # the rest of the text side too: a tokenizer_config.json that is not JSON
        run grpo-export --model gc --format $f --out "o.$f"
        [ "$status" -eq 65 ]
        assert_one_line_error grpo-export "gc/tokenizer_config.json: "
        [ ! -e "o.$f" ]
    done
    no_temp_left .
}

@test "a failure leaves --out as it was and no temporary behind" {
    needs_tiny
    mkdir -p out && echo keep > out/marker
    # a tokenizer file that is not a file: refused before the new directory is begun
    # (disk_full.bats fails exports after it was begun)
    cp -r "$TINY" src && rm src/tokenizer_config.json && mkdir src/tokenizer_config.json
    run grpo-export --model src --format hf --out out
    [ "$status" -eq 66 ]
    assert_one_line_error grpo-export "tokenizer_config.json: not a regular file \(a directory\)"
    [ "$(ls out)" = "marker" ]
    no_temp_left .
    # fails while loading: a missing tensor
    cp -r "$TINY" bad
    "$GRPO_PY" - bad/model.safetensors <<'EOF'
import sys
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
del t["model.layers.1.mlp.up_proj.weight"]
save_file(t, sys.argv[1])
EOF
    run grpo-export --model bad --format hf --out out
    [ "$status" -eq 65 ]
    assert_one_line_error grpo-export "up_proj.weight is missing"
    [ "$(ls out)" = "marker" ]
    # a regular file where the directory should go: 73, the file untouched
    echo x > file
    run grpo-export --model "$TINY" --format hf --out file
    [ "$status" -eq 73 ]
    [ "$(cat file)" = "x" ]
    no_temp_left .
    # and a success replaces the directory whole
    grpo-export --model "$TINY" --format hf --out out
    [ ! -e out/marker ]
    [ -f out/model.safetensors ]
    no_temp_left .
}

@test "a weight beyond f16: hf f16 and gguf are 65 naming the tensor and a dtype, nothing written; --clamp writes 65504" {
    needs_tiny
    cp -r "$TINY" big
    "$GRPO_PY" - big/model.safetensors <<'EOF'
import sys
from safetensors.torch import load_file, save_file
t = load_file(sys.argv[1])
t["model.layers.0.mlp.down_proj.weight"][0, 3] = 70000.0
save_file(t, sys.argv[1], metadata={"format": "pt"})
EOF
    run -65 grpo-export --model big --format hf --dtype f16 --out out
    assert_one_line_error grpo-export "big: tensor 'model.layers.0.mlp.down_proj.weight': value 3 is 7[0-9]+, beyond what f16 holds .*--dtype bf16 holds it"
    [ ! -e out ]
    run -65 grpo-export --model big --format gguf --out out.gguf
    assert_one_line_error grpo-export "tensor 'blk.0.ffn_down.weight': value 3 .*beyond what f16 holds"
    [ ! -e out.gguf ]
    no_temp_left .
    run grpo-export --model big --format hf --dtype f16 --clamp --out out
    [ "$status" -eq 0 ]
    [[ "$output" == *"--clamp: 1 weights in 1 tensors were beyond what f16 holds and were written as +-65504"* ]]
    "$GRPO_PY" - out/model.safetensors <<'EOF'
import sys
import numpy as np
from safetensors.numpy import load_file
w = load_file(sys.argv[1])["model.layers.0.mlp.down_proj.weight"]
assert w.dtype == np.float16 and w[0, 3] == 65504 and np.isfinite(w).all(), (w.dtype, w[0, 3])
EOF
}

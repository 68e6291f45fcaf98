#!/bin/sh
# A packed frozen base: one grpo-update LoRA r=16 step (--beta 0, every
# other flag at its default) per shape and --base-weights format, on
# 4 prompts x 2 completions x (64 + 64) tokens (1,024 tokens, one
# micro-batch; bench/make_batch.py, the same batch for every shape): seconds
# (the metrics line's, model load and batch read included), split into the
# load (everything before the step) and the step (--progress's "step 1"
# phase), tokens/s, its ratio to the float32 base's (goal: >= 0.8x where
# both fit) and peak RSS (/usr/bin/time; goal: the 7B shape within 12 GB
# with a q4k base).
# Shapes: SmolLM2-135M (the Q4_1 GGUF of make models), random models of
# Qwen2.5-1.5B's and Qwen2.5-7B's shapes (bench/dense_shape.py writes them
# once into build/bench: 1.6 GB and 8.1 GB of Q8_0), qwen2.5-1.5b-q4k and
# qwen2.5-7b-q4k, those exported once by grpo-export --dtype q4_k (0.87 and
# 4.3 GB; the export's seconds printed; it holds the model as float32, so
# the 7B export needs 30 GB of memory), which a q4k base takes as its blocks,
# quantizing nothing (rows f32, q4k, q4k-recompute unless
# BENCH_QLORA_FORMATS; the peer is qwen2.5-1.5b's), and gpt-oss-20b,
# bench/oss_shape.py's model of gpt-oss-20b's shape (bench/moe.sh's;
# written once into build/bench: 12.7 GB, MXFP4 experts, bf16 attention,
# Q8_0 embeddings and head), on an mxfp4 base (its experts the file's
# blocks, the rest as the file holds it; rows f32, mxfp4,
# mxfp4-recompute). Last, q4k (mxfp4) with
# --recompute (each layer's input kept, not its activations). A cell whose
# estimate (parameters x bytes per weight, plus the activations autograd
# keeps: 1,024 tokens x layers x (6 hidden + 3 FFN) floats, the FFN a
# mixture's routed experts', one layer's with --recompute, plus the logits
# and their gradient) would not fit in 90% of this machine's memory is
# skipped, saying so. The peer on the float32 row: the
# same step in PyTorch eager with PEFT (bench/qlora_peer.py, .venv-peft),
# skipped likewise where its float32 model would not fit.
# No assertions: a benchmark prints.
#   sh bench/qlora.sh [SHAPE ...]   (smollm2-135m qwen2.5-1.5b qwen2.5-1.5b-q4k qwen2.5-7b qwen2.5-7b-q4k
#                                    gpt-oss-20b,
#                                    default all but gpt-oss-20b (about 20 GB of memory);
#                                    BENCH_QLORA_RUNS=N each cell the fastest of N runs, default 1;
#                                    BENCH_QLORA_FORMATS="f32 bf16 q8 q4k q4k-recompute mxfp4 mxfp4-recompute"
#                                    the rows,
#                                    BENCH_PEER=0 skips PyTorch)
set -eu
cd "$(dirname "$0")/.."
OUT=${BENCH_DIR:-build/bench}
PY=.venv/bin/python
PEER_PY=.venv-peft/bin/python
mkdir -p "$OUT"
[ $# -gt 0 ] || set -- smollm2-135m qwen2.5-1.5b qwen2.5-1.5b-q4k qwen2.5-7b
"$PY" bench/make_batch.py "$OUT/qlora-batch.jsonl" 4 2 64 64
tokens=1024
mem_kb=$(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo)
# the OpenMP OpenBLAS for Debian's torch, as bench/model.sh explains
BLAS_OMP=/usr/lib/$(cc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)/openblas-openmp
fits() { # PARAMS BYTES_PER_WEIGHT [EXTRA_BYTES]: whether that many bytes fit in 90% of memory
    [ "$(echo "($1 * $2 + ${3:-0}) / 1024 < $mem_kb * 0.9" | bc -l)" = 1 ]
}
echo "grpo-update --lora-r 16 --beta 0, one step on $tokens tokens (4 x 2 x (64 + 64)), $(nproc) threads;" \
    "seconds include the model load; memory $((mem_kb / 1048576)) GiB"
printf '  %-16s %-13s %9s %7s %7s %9s %8s %10s %10s %8s\n' shape base seconds load step tokens/s "/ f32" "peak RSS" \
    "PEFT t/s" "ours/PT"
for shape in "$@"; do
    case $shape in
    smollm2-135m) model=models/SmolLM2-135M-Instruct.Q4_1.gguf params=134515008 layers=30 dim=576 ffn=1536 vocab=49152 ;;
    qwen2.5-1.5b) model=$OUT/qwen2.5-1.5b.gguf params=1543714304 layers=28 dim=1536 ffn=8960 vocab=151936 ;;
    qwen2.5-1.5b-q4k) model=$OUT/qwen2.5-1.5b-q4k.gguf params=1543714304 layers=28 dim=1536 ffn=8960 vocab=151936 ;;
    qwen2.5-7b) model=$OUT/qwen2.5-7b.gguf params=7615616512 layers=28 dim=3584 ffn=18944 vocab=152064 ;;
    qwen2.5-7b-q4k) model=$OUT/qwen2.5-7b-q4k.gguf params=7615616512 layers=28 dim=3584 ffn=18944 vocab=152064 ;;
    # 4 routed experts of 2880 a token
    gpt-oss-20b) model=$OUT/oss20b-shape.gguf params=20914757184 layers=24 dim=2880 ffn=11520 vocab=201088 ;;
    *) echo "bench/qlora.sh: unknown shape '$shape' (smollm2-135m qwen2.5-1.5b qwen2.5-1.5b-q4k qwen2.5-7b" \
        "qwen2.5-7b-q4k gpt-oss-20b)" >&2; exit 64 ;;
    esac
    if [ "$shape" = smollm2-135m ] && [ ! -f "$model" ]; then
        echo "  $shape: $model missing (make models); skipped"
        continue
    fi
    rows="f32 bf16 q8 q4k q4k-recompute"
    case $shape in *-q4k)
        q8=$OUT/${shape%-q4k}.gguf
        [ -f "$q8" ] || "$PY" bench/dense_shape.py build/llama.cpp/src/gguf-py "$q8" "${shape%-q4k}"
        if [ ! -f "$model" ]; then # the base exported once, as a run of many steps would
            t0=$(date +%s.%N)
            if ! bin/grpo-export --model "$q8" --format gguf --dtype q4_k --out "$model" 2> "$OUT/qlora-err"; then
                echo "  $shape: skipped: $(tail -n 1 "$OUT/qlora-err")"
                continue
            fi
            printf '  %-16s exported once: grpo-export --dtype q4_k, %.1f s\n' "$shape" "$(echo "$(date +%s.%N) - $t0" | bc -l)"
        fi
        rows="f32 q4k q4k-recompute"
    esac
    if [ "$shape" = gpt-oss-20b ]; then
        rows="f32 mxfp4 mxfp4-recompute"
        if [ ! -f "$model" ]; then
            free_gib=$(df -Pk "$OUT" | awk 'NR == 2 { printf "%d", $4 / 1048576 }')
            [ "$free_gib" -ge 14 ] || { echo "  $shape: $free_gib GiB free in $OUT (the model takes 12.7 GB); skipped"; continue; }
            "$PY" bench/oss_shape.py build/llama.cpp/src/gguf-py "$model"
        fi
    fi
    [ -f "$model" ] || "$PY" bench/dense_shape.py build/llama.cpp/src/gguf-py "$model" "$shape"
    tps_f32=""
    logits=$((tokens * vocab * 8))
    act=$((tokens * layers * (6 * dim + 3 * ffn) * 4))
    for row in ${BENCH_QLORA_FORMATS:-$rows}; do
        f=${row%-recompute} rc="" keep=$act
        [ "$f" = "$row" ] || rc=--recompute keep=$((act / layers))
        keep=$((keep + logits))
        # mxfp4: the file's bytes a weight (MXFP4 experts, bf16 attention, Q8_0 embeddings and head)
        case $f in f32) b=4 ;; bf16) b=2 ;; q8) b=1.0625 ;; q4k) b=0.5625 ;; mxfp4) b=0.61 ;; *) b=4 ;; esac
        if ! fits "$params" "$b" "$keep"; then
            printf '  %-16s %-13s skipped: %s weights x %s bytes + %s MiB of activations exceed 90%% of %s GiB\n' \
                "$shape" "$row" "$params" "$b" "$((keep / 1048576))" "$((mem_kb / 1048576))"
            continue
        fi
        secs="" step="" run=0 failed=""
        while [ $run -lt "${BENCH_QLORA_RUNS:-1}" ]; do # the fastest of the runs
            run=$((run + 1))
            rm -rf "$OUT/qlora-ckpt"
            /usr/bin/time -f '%e %M' -o "$OUT/qlora-time" bin/grpo-update --model "$model" --in "$OUT/qlora-batch.jsonl" \
                --out "$OUT/qlora-ckpt" --lr 1e-6 --beta 0 --lora-r 16 --base-weights "$f" $rc --progress \
                --metrics "$OUT/qlora-metrics.jsonl" 2>"$OUT/qlora-err" || { failed=1; break; }
            s=$(tail -n 1 "$OUT/qlora-metrics.jsonl" | sed 's/.*"seconds":\([0-9.e+-]*\).*/\1/')
            [ -z "$secs" ] || [ "$(echo "$s < $secs" | bc -l)" = 1 ] || continue
            secs=$s rss_kb=$(cut -d' ' -f2 "$OUT/qlora-time")
            # the step: --progress's last "step 1" line's seconds; the load: the rest
            step=$(tr '\r' '\n' < "$OUT/qlora-err" | sed -n 's/^grpo-update step 1 .* \([0-9.]*\)s *$/\1/p' | tail -n 1)
        done
        [ -z "$failed" ] || { echo "  $shape $row: failed"; cat "$OUT/qlora-err"; continue; }
        load=$(echo "$secs - ${step:-0}" | bc -l)
        tps=$(echo "$tokens / $secs" | bc -l)
        [ "$row" != f32 ] || tps_f32=$tps
        ratio=""
        [ -z "$tps_f32" ] || ratio=$(printf '%.2fx' "$(echo "$tps / $tps_f32" | bc -l)")
        printf '  %-16s %-13s %9.1f %7.1f %7.1f %9.1f %8s %6.0f MiB' "$shape" "$row" "$secs" "$load" "${step:-0}" "$tps" \
            "$ratio" "$((rss_kb / 1024))"
        if [ "$row" = f32 ] && [ "$shape" = qwen2.5-1.5b-q4k ]; then
            printf '  peer: as qwen2.5-1.5b'
        elif [ "$row" = f32 ] && [ "${BENCH_PEER:-1}" != 0 ]; then
            # PyTorch holds the float32 base, its LoRA and autograd's activations: 1.5 x the base
            if ! "$PEER_PY" -c 'import torch, peft, transformers' 2>/dev/null; then
                printf '  peer skipped: no torch, peft and transformers in %s' "$PEER_PY"
            elif ! fits "$params" 6 "$act"; then
                printf '  peer skipped: %s weights x 6 bytes + activations exceed 90%% of memory' "$params"
            else
                (cd bench && LD_LIBRARY_PATH="$BLAS_OMP${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
                    /usr/bin/time -f '%e %M' -o "../$OUT/qlora-peer-time" "../$PEER_PY" qlora_peer.py \
                    --batch "../$OUT/qlora-batch.jsonl" --shape "$shape" --threads "$(nproc)" \
                    > "../$OUT/qlora-peer.txt" 2>"../$OUT/qlora-peer-err") || true
                ptps=$(sed -n 's/^kv tok_s=\([0-9.]*\).*/\1/p' "$OUT/qlora-peer.txt")
                if [ -n "$ptps" ]; then
                    printf ' %10.1f %7.2fx  (PEFT peak RSS %.0f MiB)' "$ptps" "$(echo "$tps / $ptps" | bc -l)" \
                        "$(($(cut -d' ' -f2 "$OUT/qlora-peer-time") / 1024))"
                else
                    printf '  peer failed: %s' "$(tail -n 1 "$OUT/qlora-peer-err")"
                fi
            fi
        elif [ "$row" = f32 ]; then
            printf '  peer skipped (BENCH_PEER=0)'
        fi
        echo
    done
done
echo "goals: tokens/s >= 0.8x the f32 base's where both fit; qwen2.5-7b with q4k within 12 GB (12288 MiB) peak RSS;" \
    "gpt-oss-20b with mxfp4 within 24 GB (24576 MiB)"
rm -rf "$OUT/qlora-ckpt"

#!/bin/sh
# Stream throughput: decompress -> parse -> write of a large generated
# scored-records JSONL.zst, through grpo-advantage (a real stage: it parses
# every line, reads id and reward, passes every other field through and
# appends advantage), next to `zstd -dc | jq -c .` on the same file in the
# same run, and to the machine's ceiling for the same bytes (`zstd -dc` alone,
# which only decompresses). MB/s are of uncompressed JSONL.
#   BENCH_MB=400 sh bench/stream.sh     (default 200 MB uncompressed)
set -eu
cd "$(dirname "$0")/.."
MB=${BENCH_MB:-200}
DIR=${BENCH_DIR:-build/bench}
mkdir -p "$DIR"
SRC="$DIR/scored-${MB}MB.jsonl.zst"

if [ ! -f "$SRC" ]; then
    echo "generating $SRC ..." >&2
    # Records shaped like real scored rollouts: text, token ids, logprobs, rewards.
    awk -v mb="$MB" 'BEGIN {
        srand(1); target = mb * 1000000; bytes = 0; g = 0
        while (bytes < target) {
            for (s = 0; s < 8; s++) {
                toks = ""; lps = ""
                for (t = 0; t < 48; t++) {
                    toks = toks (t ? "," : "") int(rand() * 49152)
                    lps = lps (t ? "," : "") sprintf("%.6f", -rand() * 4)
                }
                r = (rand() < 0.5) ? 1 : 0
                line = sprintf("{\"id\":\"arith/%08x\",\"task\":\"arith\",\"messages\":[{\"role\":\"user\",\"content\":\"What is %d + %d * %d? Answer inside <answer></answer>.\"}],\"answer\":\"%d\",\"sample\":%d,\"prompt_tokens\":[1,9690,198,2683,314],\"completion_tokens\":[%s],\"completion\":\"<think>Let me compute this step by step: first the product, then the sum.</think><answer>%d</answer>\",\"logprobs\":[%s],\"finish_reason\":\"stop\",\"policy\":\"step-0\",\"rewards\":{\"answer\":%d,\"format\":0.5},\"reward\":%.1f}",
                    g, g % 97, g % 89, g % 83, g % 97 + (g % 89) * (g % 83), s, toks, g % 1000, lps, r, r + 0.5)
                print line
                bytes += length(line) + 1
            }
            g++
        }
    }' | zstd -q -3 -c > "$SRC.tmp"
    mv "$SRC.tmp" "$SRC"
fi

RAW_BYTES=$(zstd -dc "$SRC" | wc -c)
secs() { # best of 3 wall-clock seconds of a shell command
    best=""
    for _ in 1 2 3; do
        t0=$(date +%s.%N)
        sh -c "$1"
        t1=$(date +%s.%N)
        t=$(echo "$t1 - $t0" | bc -l)
        if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
    done
    echo "$best"
}
mbps() { echo "scale=1; $RAW_BYTES / 1000000 / $1" | bc -l; }

ceiling=$(secs "zstd -dc '$SRC' > /dev/null")
ours=$(secs "bin/grpo-advantage --in '$SRC' --out '$DIR/out.jsonl'")
ours_zst=$(secs "bin/grpo-advantage --in '$SRC' --out '$DIR/out.jsonl.zst'")
jq_s=$(secs "zstd -dc '$SRC' | jq -c . > '$DIR/jq.jsonl'")

echo "stream throughput, $(echo "scale=0; $RAW_BYTES / 1000000" | bc) MB of scored JSONL (zstd), best of 3, 1 core:"
printf '  %-44s %8s MB/s\n' "ceiling: zstd -dc > /dev/null" "$(mbps "$ceiling")"
printf '  %-44s %8s MB/s\n' "grpo-advantage .zst -> .jsonl" "$(mbps "$ours")"
printf '  %-44s %8s MB/s\n' "grpo-advantage .zst -> .jsonl.zst" "$(mbps "$ours_zst")"
printf '  %-44s %8s MB/s\n' "peer: zstd -dc | jq -c ." "$(mbps "$jq_s")"
echo "  ratio to jq:       $(echo "scale=2; $jq_s / $ours" | bc -l)x (goal >= 3x)"
echo "  ratio to ceiling:  $(echo "scale=2; $ceiling / $ours" | bc -l) of zstd -dc alone"
rm -f "$DIR/out.jsonl" "$DIR/out.jsonl.zst" "$DIR/jq.jsonl"

#!/usr/bin/env bats
# pipelines/grpo.mk with ROLLOUT_SERVER and SERVER_SYNC=restart: llama.cpp's
# llama-server (make llama-server) samples every step, restarted by
# pipelines/server.sh on each new checkpoint's GGUF export. A 3-step run on
# SmolLM2 is killed (kill -9, make's whole process group) once its first
# checkpoint is written, and run again: it ends, every step's records name
# the checkpoint that sampled them (policy ckpt/N; the server's model: MODEL
# for step 0, RUN/server/NNNN.gguf after), and make stops the server at the
# end. Skips, naming what is missing, without llama-server or the model.
# needs: models
load helpers

SMOL="$GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA_SERVER="$GRPO_ROOT/build/llama.cpp-native/bin/llama-server"

setup() {
    [ -x "$LLAMA_SERVER" ] || skip "no llama-server (make llama-server builds it)"
    [ -f "$SMOL" ] || skip "no SmolLM2 GGUF (make models)"
    T="$BATS_TEST_TMPDIR"
    cd "$T" || return 1
}

teardown() {
    [ -n "${MAKE_PID:-}" ] && kill -KILL -- "-$MAKE_PID" 2> /dev/null || true
    [ -d "$T/run" ] && make -s -f "$GRPO_ROOT/pipelines/grpo.mk" RUN="$T/run" server-stop 3>&- 2> /dev/null || true
}

@test "grpo.mk SERVER_SYNC=restart: llama-server serves each checkpoint's GGUF; kill -9 and rerun ends the run" {
    local port
    port=$(free_port)
    mkdir run
    cat > run/config.mk << CFG
MODEL = $SMOL
PREP_N = 20
STEPS = 3
PROMPTS_PER_STEP = 2
K = 2
MAX_NEW_TOKENS = 8
UPDATE_FLAGS = --lr 1e-4 --lora-r 4 --beta 0
TENSORBOARD =
PROGRESS = 0
ROLLOUT_SERVER = http://127.0.0.1:$port
SERVER_SYNC = restart
SERVER_DTYPE = q8_0
SERVER_CMD = $LLAMA_SERVER --host 127.0.0.1 --port $port -m "\$\$GRPO_SERVER_MODEL" -np 2 -c 4096 -nr --no-webui
CFG
    # the first run, killed (the whole process group) once checkpoint 1 is written
    setsid make -s -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=run > make1.log 2>&1 3>&- &
    MAKE_PID=$!
    local i
    for ((i = 0; i < 3000; i++)); do
        [ -e run/ckpt/0001/grpo/state.json ] && break
        kill -0 "$MAKE_PID" 2> /dev/null || { cat make1.log; false; }
        sleep 0.1
    done
    [ -e run/ckpt/0001/grpo/state.json ]
    kill -KILL -- "-$MAKE_PID"
    wait "$MAKE_PID" || true
    MAKE_PID=
    [ ! -e run/ckpt/0003 ]
    # the rerun ends the run
    make -s -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=run 3>&- || { cat run/steps/*/rollout*.log run/server/server.log; false; }
    [ -e run/ckpt/0003/grpo/state.json ]
    [ "$(wc -l < run/metrics.jsonl)" -eq 3 ]
    local n
    for n in 0000 0001 0002; do
        zstd -dc "run/steps/$n/rollouts.jsonl.zst" | jq -e -s --arg n "$n" --arg m "$SMOL" 'length == 4 and all(.[];
            .policy == "ckpt/" + $n and .policy_step == ($n | tonumber) and .sampler.engine == "llamacpp" and
            (if $n == "0000" then .sampler.model == $m else (.sampler.model | endswith("/server/" + $n + ".gguf")) end))'
    done
    # the last export serves on until make stops the server, which it did
    [ ! -e run/server/pid ]
    ! curl -sf "http://127.0.0.1:$port/v1/models"
    [ -e run/server/0002.gguf ] && [ ! -e run/server/0001.gguf ]
}

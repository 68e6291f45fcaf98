#!/bin/sh
# Test-only Python: a venv made from Debian's interpreter (the only one that
# can import Debian's torch), with the independent readers from PyPI.
set -eu
VENV=${1:-.venv}
PY_PKGS='tokenizers==0.22.1 safetensors==0.6.2 gguf==0.17.1 jinja2==3.1.4 numpy<2'
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import torch, tokenizers, safetensors, gguf, jinja2, numpy' 2>/dev/null; then
    exit 0
fi
/usr/bin/python3 -m venv --system-site-packages "$VENV"
# shellcheck disable=SC2086
"$VENV/bin/python" -m pip install -q --disable-pip-version-check $PY_PKGS
"$VENV/bin/python" -c 'import torch, tokenizers, safetensors, gguf, jinja2, numpy'

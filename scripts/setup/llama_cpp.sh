#!/bin/sh
# Builds llama.cpp's library (libllama, CPU only) for the test that loads our
# GGUF exports in llama.cpp (tests/bats/llama_cpp.bats). The source is the copy
# vendored by the llama-cpp-python sdist on PyPI, pinned by version and sha256.
# Usage: llama_cpp.sh DIR. Fetches DIR/llama_cpp_python-V.tar.gz once (pip,
# hash-checked), unpacks its vendor/llama.cpp into DIR/src and builds the
# static libraries into DIR/cmake (src/libllama.a, ggml/src/libggml*.a) with
# neither network nor curl/OpenSSL. LLAMA_CPP_JOBS: parallel jobs (default 2).
set -eu
DIR=${1:-build/llama.cpp}
VER=0.3.36
SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
TGZ="$DIR/llama_cpp_python-$VER.tar.gz"
JOBS=${LLAMA_CPP_JOBS:-2}

for tool in cmake c++; do
    command -v "$tool" > /dev/null || { echo "grpo: $tool is missing (make deps)" >&2; exit 1; }
done
mkdir -p "$DIR"
if ! [ -f "$TGZ" ] || [ "$(sha256sum "$TGZ" | cut -d' ' -f1)" != "$SHA" ]; then
    TMP=$(mktemp -d "$DIR/.fetch-XXXXXX")
    trap 'rm -rf "$TMP"' EXIT INT TERM
    PIP="python3 -m pip"
    [ -x .venv/bin/python ] && PIP=".venv/bin/python -m pip"
    # Hash-checking mode: pip refuses a file with another sha256. Only this
    # package as source: pip reads its metadata with wheels of the build
    # backend (with :all: it would build those from source too, minutes).
    printf 'llama-cpp-python==%s --hash=sha256:%s\n' "$VER" "$SHA" > "$TMP/req.txt"
    $PIP download --no-deps --no-binary llama-cpp-python -q --disable-pip-version-check -d "$TMP" -r "$TMP/req.txt"
    got=$(sha256sum "$TMP/llama_cpp_python-$VER.tar.gz" | cut -d' ' -f1)
    if [ "$got" != "$SHA" ]; then
        echo "grpo: llama-cpp-python sdist sha256 mismatch: got $got, want $SHA" >&2
        exit 1
    fi
    mv "$TMP/llama_cpp_python-$VER.tar.gz" "$TGZ"
    rm -rf "$TMP"
    trap - EXIT INT TERM
fi

rm -rf "$DIR/src" "$DIR/src.tmp"
mkdir -p "$DIR/src.tmp"
tar -xzf "$TGZ" -C "$DIR/src.tmp" --strip-components=3 "llama_cpp_python-$VER/vendor/llama.cpp"
# The sdist keeps the submodule's .git file, which points nowhere: kept, git
# fails there and the build info says "unknown" (without it, git would find
# our repository and llama.cpp would carry our commit as its own).
mv "$DIR/src.tmp" "$DIR/src"

# Only the library: no tools, examples, tests, server or common (which would
# want curl/OpenSSL); static; portable code (GGML_NATIVE off) so a build
# directory copied to another x86-64 machine still runs.
cmake -S "$DIR/src" -B "$DIR/cmake" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DGGML_OPENMP=ON -DGGML_BACKEND_DL=OFF \
    -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DCMAKE_INSTALL_PREFIX="$(cd "$DIR" && pwd)" > "$DIR/cmake.log" 2>&1 \
    || { tail -30 "$DIR/cmake.log" >&2; echo "grpo: llama.cpp configure failed ($DIR/cmake.log)" >&2; exit 1; }
cmake --build "$DIR/cmake" --target llama -j "$JOBS" >> "$DIR/cmake.log" 2>&1 \
    || { tail -30 "$DIR/cmake.log" >&2; echo "grpo: llama.cpp build failed ($DIR/cmake.log)" >&2; exit 1; }

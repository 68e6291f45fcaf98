#!/bin/sh
# Builds llama.cpp's own tools as a user would build them: native CPU code on
# (AVX2, AVX-512, VNNI: whatever this CPU has), OpenMP, Release. By default
# the benchmark tools llama-batched-bench and llama-quantize (the peer of
# bench/model.sh); `make llama-server` asks for llama-server, the local
# OpenAI-compatible server the judge example talks to (docs/rewards.md).
# The source is the pinned copy scripts/setup/llama_cpp.sh unpacked into SRC
# (build/llama.cpp/src); this build goes to DIR and never leaves the machine
# (native code may not run on another CPU).
# Usage: llama_native.sh SRC DIR [TARGET...]. LLAMA_CPP_JOBS: parallel jobs
# (default 2). LLAMA_NO_AMX=1 compiles without AMX (ggml's AMX kernels stop
# with SIGSEGV on a mixture of experts at batch 16 on CPUs that have AMX):
# the build of bench/llama_decode's libraries, target llama.
set -eu
SRC=${1:-build/llama.cpp/src}
DIR=${2:-build/llama.cpp-native}
[ $# -gt 2 ] && shift 2 || set -- llama-batched-bench llama-quantize
JOBS=${LLAMA_CPP_JOBS:-2}
[ -f "$SRC/CMakeLists.txt" ] || { echo "grpo: $SRC has no llama.cpp source (make llama-cpp)" >&2; exit 1; }
mkdir -p "$DIR"
flags=
[ "${LLAMA_NO_AMX:-0}" = 0 ] || flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# common (the tools' argument parser) is needed, and the server (cpp-httplib,
# vendored) for llama-server; its web UI, curl and OpenSSL are not: the UI is
# an empty table, so nothing is fetched at build time.
cmake -S "$SRC" -B "$DIR" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DGGML_BACKEND_DL=OFF \
    -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" > "$DIR/cmake.log" 2>&1 \
    || { tail -30 "$DIR/cmake.log" >&2; echo "grpo: llama.cpp (native) configure failed ($DIR/cmake.log)" >&2; exit 1; }
cmake --build "$DIR" --target "$@" -j "$JOBS" >> "$DIR/cmake.log" 2>&1 \
    || { tail -30 "$DIR/cmake.log" >&2; echo "grpo: llama.cpp (native) build failed ($DIR/cmake.log)" >&2; exit 1; }
for t in "$@"; do
    [ "$t" = llama ] && t=../src/libllama.a
    [ -e "$DIR/bin/$t" ] || { echo "grpo: llama.cpp (native) built no $DIR/bin/$t" >&2; exit 1; }
done

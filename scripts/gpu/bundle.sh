#!/bin/sh
# Gathers into build/gpu what the CUDA checks need on a GPU machine whose
# image has CUDA and PyTorch but not this project's build dependencies:
#   build/gpu/lib   the shared libraries grpo-rollout, grpo-update and
#                   test_cuda_ops load, other than glibc's, the C++ runtime's
#                   and CUDA's (those come from the image): cJSON, PCRE2,
#                   utf8proc, zstd, the OpenMP OpenBLAS and its Fortran
#                   runtime, Open MPI's (grpo-update links it; MPI starts only
#                   under a launcher)
#   build/gpu/bats  bats-core, for tests/bats/rollout_device.bats and
#                   update_device.bats
# Copy the checkout with bin/grpo-rollout, bin/grpo-update, bin/grpo-advantage,
# build/tests/test_cuda_ops, build/tests/test_cuda_moe, build/tests/test_cuda_train,
# build/gpu and .whl
# (scripts/gpu/wheels.sh) to the GPU machine; scripts/gpu/check.sh there sets
# LD_LIBRARY_PATH and PATH (docs/gpu.md).
#   make CUDA=1 bin/grpo-rollout bin/grpo-update bin/grpo-advantage \
#        build/tests/test_cuda_ops build/tests/test_cuda_moe build/tests/test_cuda_train
#   sh scripts/gpu/bundle.sh
set -eu
cd "$(dirname "$0")/../.."
# the binaries the GPU machine runs, without their debug sections (half
# their size)
for f in bin/grpo-rollout bin/grpo-update bin/grpo-advantage build/tests/test_cuda_ops build/tests/test_cuda_moe \
    build/tests/test_cuda_train build/bench/bench_cuda_model; do
    [ -e "$f" ] && strip --strip-debug "$f"
done
OUT=build/gpu
rm -rf "$OUT"
mkdir -p "$OUT/lib"
ldd bin/grpo-rollout bin/grpo-update bin/grpo-advantage build/tests/test_cuda_ops build/tests/test_cuda_train | awk '/=> \// { print $3 }' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*) continue ;;
        libstdc++.so.* | libgcc_s.so.*) continue ;; # every image has them, newer than ours
        libcuda* | libcublas* | libcudart*) continue ;;
    esac
    cp -L "$lib" "$OUT/lib/"
done
# bats finds its libraries relative to its own path
BATS=$(readlink -f "$(command -v bats)")
BATS_ROOT=$(dirname "$(dirname "$BATS")")
mkdir -p "$OUT/bats/bin"
cp "$BATS" "$OUT/bats/bin/"
for d in lib/bats-core libexec/bats-core; do
    mkdir -p "$OUT/bats/$(dirname "$d")"
    cp -r "$BATS_ROOT/$d" "$OUT/bats/$d"
done
du -sh "$OUT"

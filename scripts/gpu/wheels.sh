#!/bin/sh
# The Python wheels the GPU image lacks for make bench-gpu's TRL peer
# (bench/gpu_trl_peer.py), downloaded here (where PyPI is reachable) into
# .whl (git-ignored through .git/info/exclude): TRL and datasets, and the two
# packages of datasets' the image does not have. The image's own
# transformers, accelerate, pyarrow and pandas are used as they are. Copy
# .whl to the GPU machine; scripts/gpu/check.sh's "step" installs them under
# /tmp/site.
set -eu
cd "$(dirname "$0")/../.."
mkdir -p .git/info .whl
grep -qx '/.whl/' .git/info/exclude 2> /dev/null || echo '/.whl/' >> .git/info/exclude
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    trl==1.16.0 datasets==4.8.5 'dill==0.4.1' 'multiprocess==0.70.19'
ls .whl

#!/bin/sh
# Installs the Debian packages grpo needs, only those missing.
# As root it runs apt-get; otherwise it names what to install and fails.
set -eu
PKGS="build-essential libzstd-dev libcjson-dev libcurl4-openssl-dev libopenblas-dev libopenblas-openmp-dev libpcre2-dev libutf8proc-dev
libsqlite3-dev libseccomp-dev jq zstd bats python3-venv python3-torch clang libclang-rt-14-dev gnuplot-nox unzip bc cmake man-db
libopenmpi-dev openmpi-bin parallel"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "grpo: missing Debian packages:$missing" >&2
    echo "grpo: install them with: sudo apt-get install$missing" >&2
    exit 1
fi
echo "grpo: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >&2

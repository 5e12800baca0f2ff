#!/usr/bin/env bash
# device.sh: everything the GPU machine runs for a release check, in one call. Build here first:
#
#   ../shared/tools/gpu-test && bash tools/bench/build.sh && go build -o .gpu/cudainfo ./tools/cudainfo
#
# then, on the GPU machine (carry .gpu): bash tools/bench/device.sh
# Logs go to $OUT (or /tmp/gpu-out): cudainfo.txt, <pkg>.log, blockprobe.*, bench.*.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/gpu-out}; mkdir -p "$out"
export GOCUDA_GPU_TESTS=require   # a GPU test that skips here is a failure
echo "== cudainfo"; ./.gpu/cudainfo 2>&1 | tee "$out/cudainfo.txt"
echo "== tests"; bash .gpu/run.sh -test.v -test.count=1 -test.run "${TESTS:-.}" 2>&1 | grep -E '^(=== |ok |FAIL|--- FAIL|gpu: )' | grep -v '^=== RUN' 
[ -n "${SKIP_BLOCKPROBE:-}" ] || { echo "== blockprobe"; timeout 150 ./.gpu/bench/blockprobe -check -o "$out" 2>&1 | tail -30; }
echo "== bench"; timeout 240 ./.gpu/bench/bench -o "$out" 2>&1 | tail -30

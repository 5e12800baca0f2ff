#!/usr/bin/env bash
# build.sh: build, here (where Go is), what tools/bench and tools/blockprobe need on the GPU machine
# (where Go is not). Run from anywhere inside the checkout:
#
#   bash tools/bench/build.sh [package dirs...]     # default: cuda tools/bench (the packages with workload benchmarks)
#
# It writes .gpu/bench/ (git-ignored with .gpu/): bench and blockprobe (linux/amd64, cgo), and one
# gzipped test binary per package with a 'packages' list, in the layout of ../shared/tools/gpu-test
# (which it leaves alone: other .gpu/ files are kept). Send the tree with it (carry ".gpu") and run
# there, from the repository root:
#
#   ./.gpu/bench/blockprobe -check -o "$OUT"
#   ./.gpu/bench/bench -o "$OUT"
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || grep -qx '/.gpu/' .gitignore 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
dir=.gpu/bench
rm -rf "$dir" && mkdir -p "$dir"
if [ $# -eq 0 ]; then set -- cuda tools/bench; fi   # tools/bench: the cublas/ and mlp/ rows' gocuda side
: > "$dir/packages"
for rel in "$@"; do
  rel=${rel#./}; rel=${rel%/}
  name=$(echo "$rel" | tr '/.' '__')
  CGO_ENABLED=1 GOOS=linux GOARCH=amd64 go test -c -ldflags='-s -w' -o "$dir/$name.test" "./$rel"
  [ -f "$dir/$name.test" ] || continue   # package without test files
  gzip -9 "$dir/$name.test"
  echo "$name $rel" >> "$dir/packages"
done
for cmd in bench blockprobe; do
  CGO_ENABLED=1 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' -o "$dir/$cmd" "./tools/$cmd"
done
ls -la "$dir"
du -sh "$dir" | awk '{print "build.sh: '"$dir"' is " $1 " (the tree plus .gpu must stay under 64 MiB)"}'

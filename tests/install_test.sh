#!/usr/bin/env bash
# The installed package as a user gets it: `cmake --install` into a temporary prefix, then the
# examples built against it with find_package(xsa) (one on the shared, one on the static library)
# and run, and one example built again with nothing but pkg-config. Fails on any step.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/xsa/xsa.h"
cmake -S "$source/examples" -B "$work/examples" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/examples" -j 2 >/dev/null

"$work/examples/attention_kernel"
# A small text to train on: the README, repeated.
for _ in 1 2 3 4; do cat "$source/README.md"; done > "$work/text.txt"
OMP_NUM_THREADS=1 "$work/examples/train_and_sample" "$work/text.txt" 30 | tee "$work/out.txt"
grep -q "^validation loss" "$work/out.txt"

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig:$work/prefix/lib/$(gcc -dumpmachine)/pkgconfig"
c++ -O2 "$source/examples/attention_kernel.cpp" -o "$work/attention_pc" \
  $(pkg-config --cflags --libs xsa)
"$work/attention_pc"  # the .pc file carries the rpath: no LD_LIBRARY_PATH
echo "install, find_package(xsa) and pkg-config: all examples built and ran"

#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tests/outside/build.sh OUTDIR: build tests/outside/*.bpf.c exactly as a project that has
# libarena as a submodule would (README, "Using libarena from your project"): compile with
# print-bpf-cflags, link with print-lib's libarena.bpf.o using print-bpftool.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: build OUTDIR}
mkdir -p "$out"

# KERNEL and CLANG in the environment pick the build (make test sets them per cell).
cflags=$(make -C "$root" --no-print-directory -s print-bpf-cflags)
bpftool=$(make -C "$root" --no-print-directory -s print-bpftool)
lib=$(make -C "$root" --no-print-directory -s print-lib)
clang=${CLANG:-clang-22}
for src in "$root"/tests/outside/*.bpf.c; do
	name=$(basename "$src" .bpf.c)
	# shellcheck disable=SC2086
	$clang $cflags -c "$src" -o "$out/$name.o"
	"$bpftool" gen object "$out/$name.bpf.o" "$lib" "$out/$name.o"
	echo "outside: built $out/$name.bpf.o"
done

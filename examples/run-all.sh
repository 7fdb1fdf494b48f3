#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
# examples/run-all.sh BUILD_DIR: run every example with its linked object (in the VM).
build=${1:?usage: run-all.sh BUILD_DIR}
rc=0 passed=0 failed=0 skipped=0
for src in "$(dirname "$0")"/*.bpf.c; do
	name=$(basename "$src" .bpf.c)
	bin=$build/examples/$name
	# sched_ext schedulers need a kernel built with it; Debian's stock 6.12 is not.
	if [[ $name == scx_* ]] && [ ! -d /sys/kernel/sched_ext ]; then
		echo "example $name: this kernel has no sched_ext: skipped"
		skipped=$((skipped + 1))
		continue
	fi
	if [ ! -x "$bin" ]; then
		echo "example $name: $bin missing"
		failed=$((failed + 1))
		rc=1
		continue
	fi
	echo "== example: $name"
	# A scheduler's load time beside the tree's scx_simple, in the same guest: each of
	# its programs is verified on its own (docs/verifier-budget.md).
	simple=$build/sched_ext/build/obj/sched_ext/scx_simple.bpf.linked3.o
	if [[ $name == scx_* ]] && [ -f "$simple" ] && [ -x "$build/verifier-cost" ]; then
		"$build/verifier-cost" -T 3 "$build/examples/$name.bpf.o" "$simple" |
			awk -v n="$name" '{ t[$2] = $3 } END {
				for (k in t) if (k ~ /^scx_simple/) s = t[k]; else a = t[k];
				r = a / (s ? s : 1);
				g = (a <= 3 * s) ? "met" : "not met";
				f = "%s: the object loads in %d ms, scx_simple in %d ms: %.1fx";
				printf f " (goal: at most 3x: %s)\n", n, a, s, r, g;
			}'
	fi
	if "$bin" "$build/examples/$name.bpf.o"; then
		passed=$((passed + 1))
	else
		echo "example $name FAILED"
		failed=$((failed + 1))
		rc=1
	fi
done
if [ "$skipped" != 0 ]; then
	echo "examples: $passed passed, $failed failed, $skipped skipped"
else
	echo "examples: $passed passed, $failed failed"
fi
exit $rc

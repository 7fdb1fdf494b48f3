#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tests/scheduler-test.sh BUILD_DIR: the sched_ext scheduler made of library parts
# (examples/scx_arena) attached, loaded with workloads and detached, in both builds, in
# the guest. A kernel without sched_ext (Debian's stock 6.12) skips it and says so.
build=${1:?usage: scheduler-test.sh BUILD_DIR}
rc=0

echo "== sched_ext scheduler (examples/scx_arena), $(nproc) CPUs"
if [ ! -d /sys/kernel/sched_ext ]; then
	echo "scheduler: this kernel has no sched_ext" \
		"(Debian's stock 6.12 is built without): skipped"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
for obj in "$build/examples/scx_arena.bpf.o" "$build/asan/examples/scx_arena.bpf.o"; do
	case $obj in
	*/asan/*)
		[ -f "$obj" ] || { echo "scheduler: no sanitizer build (clang 22 only)"; continue; }
		echo "== the same, sanitizer build";;
	esac
	if [ ! -x "$build/examples/scx_arena" ] || [ ! -f "$obj" ]; then
		echo "scheduler: $obj or its loader is missing"
		echo "0 passed, 1 failed"
		rc=1
		continue
	fi
	"$build/examples/scx_arena" -t "$obj" || rc=1
done
exit $rc

#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# The kernel memory tracer (examples/kmemtrace) of the build in BUILD_DIR, in the
# sanitizer build, in the guest: attached to the kmalloc/kfree tracepoints, which fire
# in interrupts too, on every CPU, under its workload; exact accounting, no sanitizer
# report and every record freed (its own checks). The plain build runs with the
# examples (examples/run-all.sh).
build=${1:?usage: tracer-test.sh BUILD_DIR}
obj=$build/asan/examples/kmemtrace.bpf.o

echo "== kernel memory tracer (examples/kmemtrace), sanitizer build, $(nproc) CPUs"
if [ ! -f "$obj" ]; then
	echo "tracer: no sanitizer build (clang 22 only): skipped"
	echo "0 passed, 0 failed, 1 skipped"
	exit 0
fi
exec "$build/examples/kmemtrace" "$obj"

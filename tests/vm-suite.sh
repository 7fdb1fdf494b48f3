#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tests/vm-suite.sh BUILD_DIR: every VM test, run inside the guest (vm/run -- tests/vm-suite.sh).
# Each part prints its own "N passed, N failed" line; tests/suite.sh adds them up. Objects
# are found from the sources, so a stale object of a deleted test never runs.
build=${1:?usage: vm-suite.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
rc=0

# A part's header, with the seconds since the guest's suite began: where the time goes.
part() { echo "== $1 (${SECONDS}s)"; }

# A part that cannot even start still counts as a failure.
missing() { echo "vm-suite: $1 is missing"; echo "0 passed, 1 failed"; rc=1; }

objs() {	# objs SRC_GLOB OUT_DIR: the built objects of these sources
	local src
	for src in $1; do
		[ -f "$src" ] || continue
		echo "$2/$(basename "$src" .c).o"
	done
}

# Our selftests, then the compatibility suite (tests/test_upstream_*: programs written
# as upstream's are), which the runner runs as upstream's harness does (-u: the default
# allocator reset before every test but test_buddy*).
ours() { objs "$here/*.bpf.c" "$1" | grep -v '/test_upstream_'; }
upstream() { objs "$here/test_upstream_*.bpf.c" "$1"; }

echo "== vm: $(uname -r), $(nproc) CPUs"
part "selftests"
mapfile -t tests < <(ours "$build/tests")
"$build/runner" "${tests[@]}" || rc=1
part "the upstream compatibility suite"
mapfile -t tests < <(upstream "$build/tests")
"$build/runner" -u "${tests[@]}" || rc=1

# The same selftests built with the sanitizer, plus its own asan_test_* (clang 22 only).
part "selftests in the sanitizer build"
if [ -f "$build/libarena_asan.bpf.o" ]; then
	mapfile -t asan_tests < <(ours "$build/asan/tests")
	"$build/runner" -a "${asan_tests[@]}" || rc=1
	part "the upstream compatibility suite in the sanitizer build"
	mapfile -t asan_tests < <(upstream "$build/asan/tests")
	"$build/runner" -a -u "${asan_tests[@]}" || rc=1
else
	echo "vm-suite: no sanitizer build in $build (the ASAN variant needs clang 22): skipped"
fi

# What each public call costs a program's verifier budget, held against the committed
# table (docs/verifier-budget.md), and the code the verifier dropped as dead, against the
# committed list (tests/cost/unvisited); then the dead-code check's own test, which must
# fail on an object that hides a branch from the verifier. The verifier is the same in
# the stock cells (one 6.12 release): checked in the patched ones, on both builds.
cost_cell() {	# cost_cell CELL COST_DIR
	local out=$TMPDIR/costs.$$ obj=$2/calls.bpf.o
	"$build/verifier-cost" -j "$(nproc)" -l "$obj" >"$out"
	"$budget" check --cell "$1" "$out" "$obj" || rc=1
	"$budget" dead --cell "$1" "$out" "$obj" || rc=1
	rm -f "$out"
}
budget=$here/../scripts/verifier-budget
case $(basename "$build") in *clang-19*) clang=clang-19 ;; *) clang=clang-22 ;; esac
part "what each call costs the verifier (tests/cost, docs/verifier-budget.md)"
if [ ! -d /sys/kernel/sched_ext ]; then
	echo "vm-suite: the stock kernel's verifier is the patched one's: checked in its cells"
elif [ ! -x "$budget" ]; then
	echo "vm-suite: no scripts/verifier-budget (a kernel tree's copy): not checked"
elif [ ! -x "$build/verifier-cost" ] || [ ! -f "$build/cost/calls.bpf.o" ]; then
	missing "$build/verifier-cost or $build/cost/calls.bpf.o"
else
	cost_cell "$clang plain" "$build/cost"
	[ -f "$build/asan/cost/calls.bpf.o" ] && cost_cell "$clang sanitizer" "$build/asan/cost"
	out=$TMPDIR/dead.$$
	"$build/verifier-cost" -l "$build/cost/dead_branch.bpf.o" >"$out"
	if "$budget" dead --cell "$clang plain" "$out" "$build/cost/dead_branch.bpf.o" |
	   grep -q 'FAIL cost_dead_branch: line .*cost_dead_hits += x;'; then
		echo "  ok   dead-code check: fails on a branch hidden from the verifier, naming it"
		echo "1 passed, 0 failed"
	else
		echo "  FAIL dead-code check: it did not fail on tests/cost/dead_branch.bpf.c"
		echo "0 passed, 1 failed"
		rc=1
	fi
	rm -f "$out"
fi

part "objects the verifier must reject"
for src in "$here"/load_fail/*.bpf.c; do
	o=$build/tests/load_fail/$(basename "$src" .c).o
	expect=$(sed -n 's/.*expect-load-fail: *//p' "$src" | head -1)
	if [ -z "$expect" ]; then
		echo "vm-suite: $src names no expect-load-fail message"
		echo "0 passed, 1 failed"
		rc=1
		continue
	fi
	[ -f "$o" ] || { missing "$o"; continue; }
	"$build/runner" -x "$expect" "$o" || rc=1
done

part "an outside project, built with print-bpf-cflags and linked with libarena.bpf.o"
mapfile -t outside < <(objs "$here/outside/*.bpf.c" "$build/outside")
"$build/runner" "${outside[@]}" || rc=1

part "a program linked in both orders, with every licence line (tests/link)"
mapfile -t linked < <(ls "$build"/link/link_*.bpf.o 2>/dev/null)
if [ ${#linked[@]} = 8 ]; then
	"$build/runner" "${linked[@]}" || rc=1
else
	missing "$build/link/link_*.bpf.o (8 objects, ${#linked[@]} found)"
fi

part "user-space helpers"
asan_log=$build/asan/tests/test_log.bpf.o
[ -f "$asan_log" ] || asan_log=
"$build/user_test" "$build"/tests/test_{log,buddy,bitmap,heap,btree}.bpf.o $asan_log || rc=1

part "examples"
"$here/../examples/run-all.sh" "$build" || rc=1

"$here/scheduler-test.sh" "$build" || rc=1
"$here/tracer-test.sh" "$build" || rc=1
part "end of the VM tests"
exit $rc

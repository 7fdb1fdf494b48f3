#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tests/suite.sh CELL...: the whole test suite, what `make test` runs. A cell is
# KERNEL-CLANG: the kernel the library is built against and booted (patched: built from
# the packaged tree; stock: Debian's linux-image package) and the compiler of the BPF
# code, for example patched-clang-22 or stock-clang-19.
#
#   1. host-native tests (sanitizers), the layers' include rules and the README's first
#      program against its files, once, seconds;
#      the patch series: checkpatch on each patch and the tree built after each
#      (make check-series), once, with the first cell's compiler and kernel
#   2. for each cell:
#      a. its kernel, the patch series applied to the pristine tree, the library built
#         from it into the cell's build directory (make print-build)
#      b. the call frames and stack of the library's entry points, no function that uses
#         can_loop opening with a call in any object the VM loads (scripts/frame-budget),
#         an outside project built the way the README tells users to, and a program
#         linked with the library in both orders with every licence line (tests/link)
#      c. every VM test (tests/vm-suite.sh) in a guest booted on the cell's kernel
#      d. the deque races (one owner, three thieves) and the sched_ext scheduler again,
#         in a guest with 4 vCPUs (tests/vm-4cpus.sh)
#
# Every part prints its "N passed, N failed" lines. The summary names each cell with
# its result and time; the last line adds up every part of every cell.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -gt 0 ] || { echo "usage: suite CELL... (e.g. patched-clang-22 stock-clang-19)" >&2; exit 2; }
# Our make calls name their cell themselves: nothing of the caller's make leaks in.
unset MAKEFLAGS MFLAGS MAKELEVEL
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
rc=0

step() { echo "== $* ($(( $(date +%s) - start ))s)"; }

# A step that cannot produce results counts as one failed test, never as nothing.
fail_step() {	# fail_step LOG WHAT
	echo "suite: $2 failed"
	echo "0 passed, 1 failed" >>"$1"
}

# count LOG: "passed failed skipped" over every count line in LOG.
COUNT_LINE='([a-z]+: )?([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?'
count() {
	local p f s passed=0 failed=0 skipped=0
	while read -r p f s; do
		passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
	done < <(sed -nE "s/^$COUNT_LINE\$/\\2 \\3 \\5/p" "$1")
	echo "$passed $failed $skipped"
}

summary=()
problems=()

# last_attempt FILE: a guest run's output from its last attempt on (vm/run runs a guest
# that died of TCG's code-patching race once more, after a "vm/run: RETRY" line): the
# counts of the attempt that died are not results. The retry itself stays on record.
last_attempt() {
	awk '/^vm\/run: RETRY/ { out = $0 "\n"; next } { out = out $0 "\n" }
	     END { printf "%s", out }' "$1"
}
# guest WHAT VM_RUN_ARGS...: one guest of the cell (kernel, log, cell_rc of the loop); its
# last attempt's output goes into the cell's log, a guest that died or timed out fails.
guest() {
	local what=$1 vm_rc
	shift
	"$root/vm/run" -K "$kernel" "$@" 2>&1 | tee "$work/vm"
	vm_rc=${PIPESTATUS[0]}
	last_attempt "$work/vm" >>"$log"
	[ "$vm_rc" = 0 ] || cell_rc=1
	[ "$vm_rc" -lt 124 ] || fail_step "$log" "$cell: $what"
}
# record NAME LOG RC SECONDS: one summary line; a failed part without a count fails too.
record() {
	local p f s result
	read -r p f s < <(count "$2")
	if [ "$3" != 0 ] && [ "$f" = 0 ]; then
		echo "0 passed, 1 failed" >>"$2"
		f=1
	fi
	result=ok; [ "$f" = 0 ] || { result=FAIL; rc=1; }
	summary+=("$(printf '  %-18s %-4s  %s passed, %s failed, %s skipped  (%dm%02ds)' \
		"$1" "$result" "$p" "$f" "$s" $(($4 / 60)) $(($4 % 60)))")
	cat "$2" >>"$work/all"
}

: >"$work/all"
t0=$(date +%s)
step "host tests"
make -C "$root" --no-print-directory -s host-test 2>&1 | tee "$work/host"
host_rc=${PIPESTATUS[0]}
step "the library's layers (scripts/check-layers)"
"$root/scripts/check-layers" 2>&1 | tee -a "$work/host"
[ "${PIPESTATUS[0]}" = 0 ] || host_rc=1
step "the README's first program is the one built (scripts/check-readme)"
"$root/scripts/check-readme" 2>&1 | tee -a "$work/host"
[ "${PIPESTATUS[0]}" = 0 ] || host_rc=1
record host "$work/host" "$host_rc" $(($(date +%s) - t0))

# The patch series as a maintainer checks it, with the first cell's compiler and kernel
# (whose library it builds first, so the cell finds it built).
t0=$(date +%s)
step "the patch series: checkpatch, and the tree built after each patch"
make -C "$root" --no-print-directory -s KERNEL="${1%%-*}" CLANG="${1#*-}" check-series 2>&1 |
	tee "$work/series"
record series "$work/series" "${PIPESTATUS[0]}" $(($(date +%s) - t0))

for cell in "$@"; do
	kernel=${cell%%-*} clang=${cell#*-}
	log=$work/$cell
	: >"$log"
	t0=$(date +%s)
	cell_rc=0
	mk=(make -C "$root" --no-print-directory -s KERNEL="$kernel" CLANG="$clang")
	step "$cell: $kernel kernel, $clang: library, selftests, examples"
	if ! command -v "$clang" >/dev/null; then
		fail_step "$log" "$cell: $clang is not installed (make deps)"
	elif "${mk[@]}" lib; then
		build=$("${mk[@]}" print-build)
		step "$cell: call frames and stack of the library's entry points"
		objs=("$build/libarena.bpf.o")
		[ -f "$build/libarena_asan.bpf.o" ] && objs+=("$build/libarena_asan.bpf.o")
		"$root/scripts/frame-budget" "${objs[@]}" 2>&1 | tee -a "$log"
		[ "${PIPESTATUS[0]}" = 0 ] || cell_rc=1

		step "$cell: outside project"
		KERNEL=$kernel CLANG=$clang "$root/tests/outside/build.sh" "$build/outside" ||
			fail_step "$log" "$cell: the outside project's build"

		step "$cell: link orders and licence lines"
		KERNEL=$kernel CLANG=$clang "$root/tests/link/build.sh" "$build/link" 2>&1 |
			tee -a "$log"
		[ "${PIPESTATUS[0]}" = 0 ] || cell_rc=1

		# The rule on can_loop functions' first instruction holds for every object
		# the VM loads: tests, examples, benchmarks, the outside project.
		step "$cell: no can_loop function opens with a call, in every object loaded"
		mapfile -t objs < <(find "$build" -name '*.bpf.o' ! -name 'libarena*' \
				    ! -path '*/obj/*' | sort)
		"$root/scripts/frame-budget" --calls-only "${objs[@]}" 2>&1 | tee -a "$log"
		[ "${PIPESTATUS[0]}" = 0 ] || cell_rc=1

		# Some 20 minutes alone on an idle host; a busy one may need twice that.
		step "$cell: VM tests on the $kernel kernel"
		guest "the VM run" -t 2700 -- "$root/tests/vm-suite.sh" "$build"

		# Lock-free, so more vCPUs than host CPUs is fine: one owner and three thieves.
		step "$cell: deque races and the scheduler on 4 vCPUs"
		guest "the 4-vCPU VM run" -c 4 -- "$root/tests/vm-4cpus.sh" "$build"
	else
		fail_step "$log" "$cell: the build"
	fi
	record "$cell" "$log" "$cell_rc" $(($(date +%s) - t0))
	# A guest that died: its one-line reason goes into the summary, at the log's end.
	while IFS= read -r line; do
		problems+=("  $cell: ${line#vm/run: }")
	done < <(grep -E '^vm/run: (FAILED|RETRY)' "$log")
done

read -r passed failed skipped < <(count "$work/all")
[ "$failed" = 0 ] || rc=1
# A part that failed without printing its count still fails the total.
[ $rc = 0 ] || [ "$failed" != 0 ] || failed=1
step "done"
echo "== summary (cell: kernel-compiler)"
printf '%s\n' "${summary[@]}"
if [ ${#problems[@]} -gt 0 ]; then
	echo "== guests that failed, or died of TCG's patching race and ran again"
	printf '%s\n' "${problems[@]}"
fi
if [ "$skipped" != 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
exit $rc

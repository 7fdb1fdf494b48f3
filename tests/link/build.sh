#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# tests/link/build.sh OUTDIR: link tests/link/link.bpf.c with the library in both orders
# and with every licence line a user may write (none, "GPL", "Dual BSD/GPL",
# "Dual MIT/GPL"), as a project does with print-bpftool and print-lib. Each link must
# succeed and give BTF that agrees with the ELF symbols on where the program's arena
# globals and the allocator are; a licence the kernel does not take as GPL-compatible
# must stop the link with a message. The VM suite then loads and runs every object.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: build OUTDIR}
rm -rf "$out"
mkdir -p "$out"

# KERNEL and CLANG in the environment pick the build (make test sets them per cell).
cflags=$(make -C "$root" --no-print-directory -s print-bpf-cflags)
# BPFTOOL=PATH tries another bpftool (an unpatched one fails the prog_first links).
bpftool=${BPFTOOL:-$(make -C "$root" --no-print-directory -s print-bpftool)}
lib=$(make -C "$root" --no-print-directory -s print-lib)
clang=${CLANG:-clang-22}
src=$root/tests/link/link.bpf.c
passed=0 failed=0

ok() { echo "  ok   link: $*"; passed=$((passed + 1)); }
bad() { echo "  FAIL link: $*"; failed=$((failed + 1)); }

# offsets OBJ: "name offset" of the .addr_space.1 DATASEC's variables, from BTF, then
# the same from the ELF symbols; the two lists must be equal.
btf_offsets() {
	"$bpftool" btf dump file "$1" | awk '
		/^\[[0-9]+\] DATASEC / { on = ($3 == "\x27.addr_space.1\x27") ; next }
		/^\[[0-9]+\] / { on = 0 }
		on && /VAR/ {
			match($0, /offset=[0-9]+/)
			off = substr($0, RSTART + 7, RLENGTH - 7)
			match($0, /VAR \x27[^\x27]+\x27/)
			name = substr($0, RSTART + 5, RLENGTH - 6)
			print name, off
		}' | sort
}
sym_offsets() {
	local sec
	sec=$(readelf -SW "$1" 2>/dev/null | sed -nE 's/^ *\[ *([0-9]+)\] \.addr_space\.1 .*/\1/p')
	readelf -sW "$1" 2>/dev/null |
		awk -v sec="$sec" '$7 == sec && $4 == "OBJECT" && $5 == "GLOBAL" { print $2, $8 }' |
		while read -r value name; do
			echo "$name $((16#$value))"
		done | sort
}

declare -A licences=([none]="" [gpl]="GPL" [dual_bsd]="Dual BSD/GPL" [dual_mit]="Dual MIT/GPL")
for lic in none gpl dual_bsd dual_mit; do
	def=()
	[ "$lic" = none ] || def=("-DLICENCE=\"${licences[$lic]}\"")
	# shellcheck disable=SC2086
	$clang $cflags "${def[@]}" -c "$src" -o "$out/$lic.o" ||
		{ bad "$lic: compile"; continue; }
	for order in lib_first prog_first; do
		obj=$out/link_${lic}_$order.bpf.o
		if [ $order = lib_first ]; then
			inputs=("$lib" "$out/$lic.o")
		else
			inputs=("$out/$lic.o" "$lib")
		fi
		if ! "$bpftool" gen object "$obj" "${inputs[@]}" >"$out/err" 2>&1; then
			bad "$lic, $order: bpftool gen object failed: $(tail -1 "$out/err")"
			rm -f "$obj"
			continue
		fi
		btf=$(btf_offsets "$obj")
		syms=$(sym_offsets "$obj")
		if [ -z "$btf" ] || [ "$btf" != "$syms" ] ||
		   ! grep -q '^buddy ' <<<"$btf" || ! grep -q '^link_data ' <<<"$btf"; then
			bad "$lic, $order: BTF and ELF symbols disagree on the arena globals"
			diff <(echo "$btf") <(echo "$syms") | head -5
			continue
		fi
		ok "$lic, $order: linked, BTF offsets equal the symbols'"
	done
done

# A licence the kernel does not take as GPL-compatible cannot share an object with the
# library's GPL-only kfunc calls: the link itself must refuse it, saying where.
$clang $cflags -DLICENCE='"Proprietary"' -c "$src" -o "$out/proprietary.o" &&
if "$bpftool" gen object "$out/proprietary.bpf.o" "$out/proprietary.o" "$lib" \
	>"$out/err" 2>&1; then
	bad "a \"Proprietary\" licence linked with the library's \"GPL\""
	rm -f "$out/proprietary.bpf.o"
elif grep -q "section 'license'" "$out/err"; then
	ok "a \"Proprietary\" licence refused at link time: $(grep "section 'license'" "$out/err")"
else
	bad "a \"Proprietary\" licence refused without naming the licence: $(tail -1 "$out/err")"
fi
rm -f "$out/proprietary.bpf.o" "$out/err"
echo "link: $passed passed, $failed failed"
[ "$failed" = 0 ]

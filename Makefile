# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# libarena: the two commands
#
#   make test    the whole suite: host tests, then every selftest in the VM, in every
#                cell of the test matrix (below)
#   make run     the main job: the examples, in the VM
#
# and the pieces they are made of:
#
#   make deps      install the packages the build needs (apt-get)
#   make kernel    build (or find cached) the guest kernel from linux-source-6.12
#                  (KERNEL=stock: fetch and unpack Debian's stock kernel)
#   make patches   write the patch series into build/patches/: a cover letter and one
#                  patch per component, signed off by LIBARENA_SOB="Name <mail>" or
#                  git config user.name/user.email
#   make check-series  checkpatch on each patch, and the tree built after each one
#   make lib       apply the series to the pristine tree and build the library from it
#   make host-test the host-native tests only
#   make vm-test   the VM tests only
#   make bench     the allocator benchmark, in the VM (figures, not pass/fail), and
#                  again in the sanitizer build with the ratio (clang 22); plots the
#                  figures into build/bench.svg (gnuplot); then the ordered maps
#                  (B-tree, red-black tree, hash map) side by side, and the
#                  concurrent hash map against BPF_MAP_TYPE_HASH on 1 and all vCPUs
#   make bench-btree-nodes   the B-tree's benchmark for each node size, 256 B to 1 KiB
#   make print-bpf-cflags | print-asan-cflags | print-bpftool | print-runner | print-lib
#
# Which kernel and compiler (a "cell" of the test matrix):
#
#   KERNEL=patched   the guest kernel built from the packaged tree (default)
#   KERNEL=stock     Debian's stock linux-image-6.12 (vm/stock-kernel): the library is
#                    built against its vmlinux.h and the VM boots it
#   CLANG=clang-22   the compiler of the BPF code (default); clang-19 is the oldest
#
# The default cell builds into build/, any other into build/KERNEL-CLANG/, so cells never
# overwrite each other. `make test` runs every cell of {patched, stock} x {clang-22,
# clang-19}; KERNEL= or CLANG= on its command line narrows it to those.
#
# Heavy work is cached in $(LIBARENA_CACHE) (default ~/.cache/libarena): the extracted
# tree, the kernel keyed by (tree version, config, kernel patches), libbpf and bpftool,
# the stock kernel keyed by its package version.

LIBARENA_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/libarena
export LIBARENA_CACHE
KERNEL ?= patched
CLANG ?= clang-22
CELL := $(KERNEL)-$(notdir $(CLANG))
DEFAULT_CELL := patched-clang-22
BUILD := $(CURDIR)/build
# This cell's build: the default one where users' projects expect it.
OUT := $(if $(filter $(DEFAULT_CELL),$(CELL)),$(BUILD),$(BUILD)/$(CELL))
PATCHES := $(BUILD)/patches
# The same series as the build applies it to its own tree (signed as a placeholder when no
# identity is set): apart, so that a build never rewrites the series made to be sent.
TREE_PATCHES := $(BUILD)/tree-patches
# The patched tree; a second work tree with another series sets its own LIBARENA_TREE.
LIBARENA_TREE ?= $(LIBARENA_CACHE)/tree
export LIBARENA_TREE
TREE := $(LIBARENA_TREE)
INTREE := $(TREE)/tools/testing/selftests/bpf/libarena
TOOLS_OUT = $(shell bash -c '. vm/lib.sh && tools_dir')
ifeq ($(KERNEL),patched)
VMLINUX_BTF = $(shell bash -c '. vm/lib.sh && kernel_dir')/vmlinux
else ifeq ($(KERNEL),stock)
VMLINUX_BTF = $(shell vm/stock-kernel -p)/vmlinux.btf
else
$(error KERNEL=$(KERNEL): patched or stock)
endif
VM_ARGS ?=

# The library's own Makefile, run from the patched tree (or from here for print-*).
LIBMAKE_VARS = OUTPUT=$(OUT) TOOLS_OUT=$(TOOLS_OUT) CLANG=$(CLANG) VMLINUX_BTF=$(VMLINUX_BTF)
LIBMAKE = $(MAKE) --no-print-directory -s -C $(INTREE) $(LIBMAKE_VARS)
PRINTMAKE = $(MAKE) --no-print-directory -s -f $(CURDIR)/libarena.mk KSRC=$(TREE) \
	VMLINUX_H=$(OUT)/include/vmlinux.h $(LIBMAKE_VARS)
VM = vm/run -K $(KERNEL) $(VM_ARGS)

# The cells `make test` runs: all, or those KERNEL= and CLANG= name.
given = $(filter command line environment,$(origin $(1)))
TEST_KERNELS := $(if $(call given,KERNEL),$(KERNEL),patched stock)
TEST_CLANGS := $(if $(call given,CLANG),$(CLANG),clang-22 clang-19)
TEST_CELLS := $(foreach k,$(TEST_KERNELS),$(foreach c,$(TEST_CLANGS),$(k)-$(c)))

all: lib

deps:
	@scripts/install-deps

kernel: deps
ifeq ($(KERNEL),stock)
	@vm/stock-kernel >/dev/null
else
	@vm/build-kernel >/dev/null
endif

# The series to send needs a Signed-off-by identity.
patches:
	@kernel/make-patches $(PATCHES) >/dev/null
	@echo "patches: $$(ls $(PATCHES) | wc -l) in $(PATCHES)"

tree: deps
	@kernel/make-patches --any-identity $(TREE_PATCHES) >/dev/null
	@kernel/patched-tree $(TREE_PATCHES) >/dev/null

lib: tree kernel
	@$(LIBMAKE) all

# The series as a maintainer checks it: checkpatch on each patch, and the tree built
# after each (scripts/check-series). Uses the cell's compiler, kernel BTF and tools.
check-series: lib
	@CLANG=$(CLANG) VMLINUX_BTF=$(VMLINUX_BTF) TOOLS_OUT=$(TOOLS_OUT) \
		scripts/check-series $(TREE_PATCHES)

host-test: deps
	@$(MAKE) --no-print-directory -s -f tests/host/host.mk OUTPUT=$(BUILD)/host run

vm-test: lib
	@KERNEL=$(KERNEL) CLANG=$(CLANG) tests/outside/build.sh $(OUT)/outside
	@KERNEL=$(KERNEL) CLANG=$(CLANG) tests/link/build.sh $(OUT)/link
	@$(VM) -- tests/vm-suite.sh $(OUT)

test: deps
	@tests/suite.sh $(TEST_CELLS)

run: lib
	@$(VM) -- examples/run-all.sh $(OUT)

bench: lib
	@rm -f $(OUT)/bench.dat
	@$(VM) -w $(OUT) -- env BENCH_DATA=$(OUT)/bench.dat scripts/asan-bench $(OUT)
	@scripts/bench-plot $(OUT)/bench.dat $(OUT)/bench.svg
	@echo; echo "== ordered maps"
	@$(VM) -- $(OUT)/bench/bench_trees $(OUT)/bench/bench_trees.bpf.o
	@echo; echo "== hash maps"
	@$(VM) -- $(OUT)/bench/bench_hashmap $(OUT)/bench/bench_hashmap.bpf.o

# The B-tree's node size, measured: its benchmark on nodes of 256 bytes to 1 KiB (the
# library built once per size, BT_SEARCH_STEPS 4..6), all in one boot. Larger nodes
# (7, 8: 2 and 4 KiB) take the search past 6.12's verifier budget.
BTREE_NODES := $(OUT)/btree-nodes
bench-btree-nodes: lib
	@for k in 4 5 6; do \
		$(LIBMAKE) OUTPUT=$(BTREE_NODES)/$$k EXTRA_BPF_CFLAGS=-DBT_SEARCH_STEPS=$$k bench \
			|| exit 1; \
	done
	@$(VM) -- scripts/btree-node-sizes $(BTREE_NODES)

# What they name is built by `make lib` with the same KERNEL= and CLANG=: say so when
# that build does not exist yet (on stderr: stdout stays the one answer).
print-bpf-cflags print-asan-cflags print-bpftool print-runner print-user-cflags \
print-user-libs print-lib:
	@$(PRINTMAKE) $@
	@[ -d $(OUT) ] || echo "libarena: $(OUT) is not built yet: run make lib" \
		"KERNEL=$(KERNEL) CLANG=$(CLANG) first" >&2

print-build:
	@echo $(OUT)

clean:
	rm -rf $(BUILD)

.NOTPARALLEL:
.PHONY: all deps kernel patches tree lib check-series host-test vm-test test run bench \
	bench-btree-nodes clean \
	print-bpf-cflags print-asan-cflags print-bpftool print-runner print-user-cflags \
	print-user-libs print-lib print-build

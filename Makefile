# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# libarena: the two commands
#
#   make test    the whole suite: host tests, then every selftest in the VM
#   make run     the main job: the examples, in the VM
#
# and the pieces they are made of:
#
#   make deps      install the packages the build needs (apt-get)
#   make kernel    build (or find cached) the guest kernel from linux-source-6.12
#   make patches   write the patch series into build/patches/
#   make lib       apply the series to the pristine tree and build the library from it
#   make host-test the host-native tests only
#   make vm-test   the VM tests only
#   make bench     the allocator benchmark, in the VM (figures, not pass/fail)
#   make print-bpf-cflags | print-asan-cflags | print-bpftool | print-runner
#
# Heavy work is cached in $(LIBARENA_CACHE) (default ~/.cache/libarena): the extracted
# tree, the kernel keyed by (tree version, config, kernel patches), libbpf and bpftool.

LIBARENA_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/libarena
export LIBARENA_CACHE
CLANG ?= clang-22
BUILD := $(CURDIR)/build
PATCHES := $(BUILD)/patches
# The patched tree; a second work tree with another series sets its own LIBARENA_TREE.
LIBARENA_TREE ?= $(LIBARENA_CACHE)/tree
export LIBARENA_TREE
TREE := $(LIBARENA_TREE)
INTREE := $(TREE)/tools/testing/selftests/bpf/libarena
TOOLS_OUT = $(shell bash -c '. vm/lib.sh && tools_dir')
KERNEL_DIR = $(shell bash -c '. vm/lib.sh && kernel_dir')
VM_ARGS ?=

# The library's own Makefile, run from the patched tree (or from here for print-*).
LIBMAKE_VARS = OUTPUT=$(BUILD) TOOLS_OUT=$(TOOLS_OUT) CLANG=$(CLANG) \
	VMLINUX_BTF=$(KERNEL_DIR)/vmlinux
LIBMAKE = $(MAKE) --no-print-directory -s -C $(INTREE) $(LIBMAKE_VARS)
PRINTMAKE = $(MAKE) --no-print-directory -s -f $(CURDIR)/libarena.mk KSRC=$(TREE) \
	VMLINUX_H=$(BUILD)/include/vmlinux.h $(LIBMAKE_VARS)

all: lib

deps:
	@scripts/install-deps

kernel: deps
	@vm/build-kernel >/dev/null

patches:
	@kernel/make-patches $(PATCHES) >/dev/null
	@echo "patches: $$(ls $(PATCHES) | wc -l) in $(PATCHES)"

tree: patches deps
	@kernel/patched-tree $(PATCHES) >/dev/null

lib: tree kernel
	@$(LIBMAKE) all

host-test: deps
	@$(MAKE) --no-print-directory -s -f tests/host/host.mk OUTPUT=$(BUILD)/host run

vm-test: lib
	@vm/run $(VM_ARGS) -- tests/vm-suite $(BUILD)

test: deps
	@tests/suite $(BUILD)

run: lib
	@vm/run $(VM_ARGS) -- examples/run-all $(BUILD)

bench: lib
	@vm/run $(VM_ARGS) -- $(BUILD)/bench/bench $(BUILD)/bench/bench_alloc.bpf.o

print-bpf-cflags print-asan-cflags print-bpftool print-runner print-user-cflags \
print-user-libs:
	@$(PRINTMAKE) $@

clean:
	rm -rf $(BUILD)

.NOTPARALLEL:
.PHONY: all deps kernel patches tree lib host-test vm-test test run bench clean \
	print-bpf-cflags print-asan-cflags print-bpftool print-runner print-user-cflags \
	print-user-libs

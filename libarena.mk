# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# Builds libarena: the BPF library objects, the selftests linked with them, the
# user-space helper library and the test runner.
#
# In a kernel tree this is the Makefile of selftests/bpf/libarena/, and it takes
# libbpf and bpftool from the tree's own tools/. Standalone (the git submodule form) it
# needs KSRC, a kernel tree (6.12 or newer) to take them from, or BPFTOOL, LIBBPF_A and
# LIBBPF_INCLUDE given directly. Either way it needs VMLINUX_BTF (a vmlinux with BTF) or
# VMLINUX_H (a ready vmlinux.h).
#
#   make                    library, asan variant (library, selftests and benchmark under
#                           asan/), selftests, runner, examples
#   make OUTPUT=dir/        put everything in dir/ (default: ./build/)
#   make print-bpf-cflags   flags to compile your own .bpf.c against the library
#   make print-asan-cflags  the same for the sanitizer build
#   make print-bpftool      the bpftool that links objects (bpftool gen object)
#   make print-runner       the test runner
#   make print-lib          the linked library object (libarena.bpf.o) to link with
#
# CLANG (default clang-22) compiles the BPF code: clang 19 or newer; the sanitizer
# variant needs clang 22 and is left out, with a message, when CLANG is older.

LIBARENA_DIR := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))

ifneq ($(wildcard $(LIBARENA_DIR)/../../../../lib/bpf/libbpf.c),)
KSRC ?= $(abspath $(LIBARENA_DIR)/../../../../..)
endif

OUTPUT ?= $(LIBARENA_DIR)/build/
override OUTPUT := $(abspath $(OUTPUT))
TOOLS_OUT ?= $(OUTPUT)/tools
override TOOLS_OUT := $(abspath $(TOOLS_OUT))

CLANG ?= clang-22
HOSTCC ?= cc
Q ?= @

ifneq ($(KSRC),)
LIBBPF_SRC := $(KSRC)/tools/lib/bpf
BPFTOOL_SRC := $(KSRC)/tools/bpf/bpftool
LIBBPF_A ?= $(TOOLS_OUT)/libbpf/libbpf.a
LIBBPF_INCLUDE ?= $(TOOLS_OUT)/include
BPFTOOL ?= $(TOOLS_OUT)/bpftool/bootstrap/bpftool
endif

ifeq ($(LIBBPF_A),)
$(error libarena: set KSRC=<kernel tree> or BPFTOOL, LIBBPF_A and LIBBPF_INCLUDE)
endif

VMLINUX_H ?= $(OUTPUT)/include/vmlinux.h

# Components: one source each in src/; the build needs no change to add one.
LIB_SRCS := $(sort $(wildcard $(LIBARENA_DIR)/src/*.bpf.c))
LIB_NAMES := $(notdir $(LIB_SRCS:.bpf.c=))
TEST_SRCS := $(sort $(wildcard $(LIBARENA_DIR)/tests/*.bpf.c))
TEST_NAMES := $(notdir $(TEST_SRCS:.bpf.c=))
# $(call present,FILE,TEXT): TEXT when FILE exists (a part of the series may be absent).
present = $(if $(wildcard $(1)),$(2))
EXAMPLE_SRCS := $(sort $(wildcard $(LIBARENA_DIR)/examples/*.bpf.c))
# sched_ext schedulers (scx_*) need a kernel built with it (Debian's stock 6.12 is not)
# and the tree's sched_ext headers: SCHED_EXT=y or empty, from the kernel's config.
SCHED_EXT ?= $(shell grep -qs '^CONFIG_SCHED_CLASS_EXT=y' $(dir $(VMLINUX_BTF))config \
	$(dir $(VMLINUX_BTF)).config && echo y)
SCX_INCLUDE ?= $(KSRC)/tools/sched_ext/include
EXAMPLE_NAMES := $(filter-out $(if $(SCHED_EXT),,scx_%),$(notdir $(EXAMPLE_SRCS:.bpf.c=)))
USER_SRCS := $(sort $(wildcard $(LIBARENA_DIR)/userspace/*.c))

BPF_ARCH := x86
BPF_INCLUDES := -I$(LIBARENA_DIR)/include -I$(dir $(VMLINUX_H)) -I$(LIBBPF_INCLUDE)
CLANG_MAJOR := $(firstword $(subst ., ,$(shell $(CLANG) -dumpversion 2>/dev/null)))
clang_older_than = $(shell [ "0$(CLANG_MAJOR)" -lt $(1) ] 2>/dev/null && echo y)
# Before clang 22 the BPF backend lowers memset/memcpy on arena memory without the
# addr_space_cast, so the store goes through the user address and the verifier rejects
# it ("invalid mem access 'scalar'"); the optimizer makes memsets out of plain stores
# (neighbouring fields zeroed one by one). -fno-builtin keeps it from doing that.
OLD_CLANG_CFLAGS := $(if $(call clang_older_than,22),-fno-builtin)
# What a user's .bpf.c needs (print-bpf-cflags); our own sources also get WARN_CFLAGS.
BPF_CFLAGS := -g -O2 --target=bpf -mcpu=v3 -D__TARGET_ARCH_$(BPF_ARCH) $(BPF_INCLUDES) \
	$(OLD_CLANG_CFLAGS) $(EXTRA_BPF_CFLAGS)
WARN_CFLAGS := -Wall -Werror -Wno-unused-function
# The sanitizer instruments arena (address space 1) accesses only, with its shadow in
# the arena; the runtime lives in the library (src/asan.bpf.c). memset/memcpy/memmove
# on arena memory become calls to the runtime's checked __asan_mem* (the prefix keeps
# them apart from the C library's names).
ASAN_FLAGS := -fsanitize=kernel-address -mllvm -asan-instrument-address-spaces=1 \
	-mllvm -asan-shadow-addr-space=1 -mllvm -asan-kernel=1 -mllvm -asan-stack=0 \
	-mllvm -asan-globals=0 -mllvm -asan-constructor-kind=none \
	-mllvm -asan-destructor-kind=none -mllvm -asan-kernel-mem-intrinsic-prefix=1 \
	-mllvm -asan-instrumentation-with-call-threshold=-1 -DLIBARENA_ASAN=1 -DBPF_ARENA_ASAN=1
ASAN_CFLAGS := $(BPF_CFLAGS) $(ASAN_FLAGS)

USER_CFLAGS := -g -O2 -I$(LIBARENA_DIR)/include -I$(LIBBPF_INCLUDE) $(EXTRA_USER_CFLAGS)
USER_LIBS := $(LIBBPF_A) -lelf -lz -lpthread

LIB_OBJ := $(OUTPUT)/libarena.bpf.o
ASAN_LIB_OBJ := $(OUTPUT)/libarena_asan.bpf.o
USER_LIB := $(OUTPUT)/libarena_user.a
RUNNER := $(OUTPUT)/runner
# User-space tools built with the library (tools/NAME.c -> NAME): arena-top.
TOOL_BINS := $(patsubst $(LIBARENA_DIR)/tools/%.c,$(OUTPUT)/%,$(wildcard $(LIBARENA_DIR)/tools/*.c))
TEST_OBJS := $(TEST_NAMES:%=$(OUTPUT)/tests/%.bpf.o)
EXAMPLE_OBJS := $(EXAMPLE_NAMES:%=$(OUTPUT)/examples/%.bpf.o)
EXAMPLE_BINS := $(patsubst $(LIBARENA_DIR)/examples/%.c,$(OUTPUT)/examples/%, \
	$(filter-out %.bpf.c $(if $(SCHED_EXT),,%/scx_arena.c), \
	$(wildcard $(LIBARENA_DIR)/examples/*.c)))
# The tree's own scx_simple, built by the tree's own Makefile, for the scheduler demo
# to compare with.
EXAMPLE_BINS += $(if $(SCHED_EXT),$(if $(KSRC),$(call present, \
	$(LIBARENA_DIR)/examples/scx_arena.bpf.c,$(OUTPUT)/examples/scx_simple)))
# Its Makefile needs a whole LLVM toolchain (clang, ld.lld, llvm-ar) of one version:
# make deps installs it for 22 only, and scx_simple is the baseline, not our code, so
# every cell builds it with 22.
SCX_LLVM ?= -22
# The sanitizer build of the schedulers and the tracer: their tests run it too.
ASAN_EXAMPLE_OBJS := $(patsubst %,$(OUTPUT)/asan/examples/%.bpf.o,$(filter scx_% kmemtrace, \
	$(EXAMPLE_NAMES)))

LOAD_FAIL_SRCS := $(sort $(wildcard $(LIBARENA_DIR)/tests/load_fail/*.bpf.c))
LOAD_FAIL_OBJS := $(patsubst $(LIBARENA_DIR)/tests/load_fail/%.bpf.c, \
	$(OUTPUT)/tests/load_fail/%.bpf.o,$(LOAD_FAIL_SRCS))
USER_TEST := $(OUTPUT)/user_test
# What each public call costs the verifier: one caller program per call (tests/cost/),
# plain and sanitizer builds, and the tool that loads them in the VM.
COST_SRCS := $(wildcard $(LIBARENA_DIR)/tests/cost/*.bpf.c)
COST_OBJS := $(patsubst $(LIBARENA_DIR)/tests/cost/%.bpf.c,$(OUTPUT)/cost/%.bpf.o,$(COST_SRCS))
ASAN_COST_OBJS := $(patsubst $(LIBARENA_DIR)/tests/cost/%.bpf.c,$(OUTPUT)/asan/cost/%.bpf.o, \
	$(COST_SRCS))
COST_TOOL := $(OUTPUT)/verifier-cost
BENCH_SRCS := $(sort $(wildcard $(LIBARENA_DIR)/bench/*.bpf.c))
BENCH_OBJS := $(patsubst $(LIBARENA_DIR)/bench/%.bpf.c,$(OUTPUT)/bench/%.bpf.o,$(BENCH_SRCS))

# The sanitizer variant needs its runtime (src/asan.bpf.c) to link, and clang 22: older
# ones lack the options that keep the shadow in the arena (address space 1).
ASAN_MIN_CLANG := 22
ASAN_CLANG_OK := $(if $(call clang_older_than,$(ASAN_MIN_CLANG)),,y)
ASAN_TOO_OLD := libarena: the ASAN variant needs clang $(ASAN_MIN_CLANG) or newer; \
	CLANG=$(CLANG) is clang $(or $(CLANG_MAJOR),unknown)
ASAN_TARGET := $(if $(wildcard $(LIBARENA_DIR)/src/asan.bpf.c),$(if \
	$(ASAN_CLANG_OK),asan-lib,asan-skip))

# The sanitizer build of the selftests and the benchmark: same sources, ASAN_CFLAGS,
# linked with libarena_asan.bpf.o, under $(OUTPUT)/asan/.
ASAN_TEST_OBJS := $(TEST_NAMES:%=$(OUTPUT)/asan/tests/%.bpf.o)
ASAN_BENCH_OBJS := $(patsubst $(LIBARENA_DIR)/bench/%.bpf.c,$(OUTPUT)/asan/bench/%.bpf.o, \
	$(BENCH_SRCS))

# Each part is built when its sources are there, so that every prefix of the patch
# series builds (make check-series): the first patch has no library source yet, and the
# runner and the host tests come before any allocator.
BENCH_BINS := $(patsubst $(LIBARENA_DIR)/bench/%.c,$(OUTPUT)/bench/%,$(filter-out %.bpf.c, \
	$(wildcard $(LIBARENA_DIR)/bench/*.c)))

all: headers lib $(ASAN_TARGET) tests runner examples bench
bench: $(BENCH_OBJS) $(BENCH_BINS)
lib: $(if $(LIB_NAMES),$(LIB_OBJ)) $(if $(USER_SRCS),$(USER_LIB))
asan-lib: $(ASAN_LIB_OBJ) $(ASAN_TEST_OBJS) $(ASAN_BENCH_OBJS) $(ASAN_EXAMPLE_OBJS) \
	$(ASAN_COST_OBJS)
asan-skip:
	@echo "$(ASAN_TOO_OLD): not built" >&2
tests: $(TEST_OBJS) $(LOAD_FAIL_OBJS) \
	$(call present,$(LIBARENA_DIR)/tests/user_test.c,$(USER_TEST)) \
	$(COST_OBJS) $(call present,$(LIBARENA_DIR)/tests/verifier_cost.c,$(COST_TOOL))
runner: $(call present,$(LIBARENA_DIR)/tests/runner.c,$(RUNNER))
examples: $(EXAMPLE_OBJS) $(EXAMPLE_BINS) $(TOOL_BINS)

print-bpf-cflags:
	@echo $(BPF_CFLAGS)
print-asan-cflags:
	@echo $(ASAN_CFLAGS)
print-bpftool:
	@echo $(BPFTOOL)
print-runner:
	@echo $(RUNNER)
print-lib:
	@echo $(LIB_OBJ)
print-user-cflags:
	@echo $(USER_CFLAGS)
print-user-libs:
	@echo $(USER_LIB) $(USER_LIBS)

# libbpf and bpftool from the kernel tree.
ifneq ($(KSRC),)
$(LIBBPF_A): $(wildcard $(LIBBPF_SRC)/*.[ch] $(LIBBPF_SRC)/Makefile)
	$(Q)mkdir -p $(TOOLS_OUT)/libbpf
	$(Q)$(MAKE) -s -C $(LIBBPF_SRC) OUTPUT=$(TOOLS_OUT)/libbpf/ BUILD_STATIC_ONLY=1 \
		DESTDIR=$(TOOLS_OUT) prefix= INCLUDEDIR=/include \
		$(TOOLS_OUT)/libbpf/libbpf.a install_headers >/dev/null

$(BPFTOOL): $(wildcard $(BPFTOOL_SRC)/*.[ch] $(BPFTOOL_SRC)/Makefile $(LIBBPF_SRC)/*.[ch])
	$(Q)mkdir -p $(TOOLS_OUT)/bpftool
	$(Q)$(MAKE) -s -C $(BPFTOOL_SRC) OUTPUT=$(TOOLS_OUT)/bpftool/ bootstrap >/dev/null
endif

# The stamp names the BTF source: switching to another (older) vmlinux regenerates.
BTF_STAMP := $(OUTPUT)/include/.vmlinux-btf
$(BTF_STAMP): FORCE
	$(Q)mkdir -p $(dir $@)
	$(Q)echo "$(abspath $(VMLINUX_BTF))" | cmp -s - $@ || echo "$(abspath $(VMLINUX_BTF))" > $@

$(OUTPUT)/include/vmlinux.h: $(VMLINUX_BTF) $(BTF_STAMP) | $(BPFTOOL)
	$(if $(VMLINUX_BTF),,$(error libarena: set VMLINUX_BTF=<vmlinux with BTF> or VMLINUX_H))
	$(Q)$(BPFTOOL) btf dump file $(VMLINUX_BTF) format c > $@.tmp && mv $@.tmp $@

# Each BPF object depends on the headers and parts it includes, as the compiler lists them
# (-MMD): adding a component rebuilds only what includes it.
BPF_DEPS := $(VMLINUX_H) $(LIBBPF_A)
DEP_FLAGS := -MMD -MP
-include $(shell find $(addprefix $(OUTPUT)/,obj asan tests bench examples headers cost) \
	-name '*.d' 2>/dev/null)
EXAMPLE_HDRS := $(wildcard $(LIBARENA_DIR)/examples/*.h)

# Every public header compiles alone (it includes what it uses): BPF headers with the
# BPF flags, the user-space one (userspace.h) as user-space C; both without a warning
# under -Wall -Wextra, so that a project that builds with -Werror can include them.
PUBLIC_HDRS := $(notdir $(wildcard $(LIBARENA_DIR)/include/libarena/*.h))
USER_HDRS := userspace.h
headers: $(PUBLIC_HDRS:%=$(OUTPUT)/headers/%.ok) $(OUTPUT)/headers/all.ok

# And all of them in one translation unit, as a program that uses every component has it.
BPF_HDRS := $(filter-out $(USER_HDRS),$(PUBLIC_HDRS))
$(OUTPUT)/headers/all.ok: $(BPF_HDRS:%=$(LIBARENA_DIR)/include/libarena/%) $(BPF_DEPS)
	$(Q)mkdir -p $(dir $@)
	$(Q)printf '#include <libarena/%s>\n' $(BPF_HDRS) | \
		$(CLANG) $(BPF_CFLAGS) $(WARN_CFLAGS) -Wextra -fsyntax-only -x c - && touch $@

$(OUTPUT)/headers/%.ok: $(LIBARENA_DIR)/include/libarena/% $(BPF_DEPS)
	$(Q)mkdir -p $(dir $@)
	$(Q)echo '#include <libarena/$*>' | \
		$(if $(filter $(USER_HDRS),$*),$(HOSTCC) $(USER_CFLAGS),$(CLANG) $(BPF_CFLAGS)) \
		$(WARN_CFLAGS) -Wextra -fsyntax-only -MMD -MP -MF $(@:.ok=.d) -MT $@ -x c - && touch $@

$(OUTPUT)/obj/%.bpf.o: $(LIBARENA_DIR)/src/%.bpf.c $(BPF_DEPS)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(WARN_CFLAGS) $(DEP_FLAGS) -c $< -o $@

$(OUTPUT)/asan/obj/%.bpf.o: $(LIBARENA_DIR)/src/%.bpf.c $(BPF_DEPS)
	$(if $(ASAN_CLANG_OK),,$(error $(ASAN_TOO_OLD)))
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(ASAN_CFLAGS) $(WARN_CFLAGS) $(DEP_FLAGS) -c $< -o $@

# A program linked with the library: the library first. The 6.12 linker (libbpf 1.5, and
# later ones too) leaves an extern arena variable of the first object at offset 0 of
# the merged .addr_space.1 BTF, whatever its real offset; when the object that defines
# it comes first, the extern is resolved before it is placed. Upstream programs reach
# the default allocator as `extern struct buddy __arena buddy`.
LIB_FIRST = %/libarena.bpf.o %/libarena_asan.bpf.o
LINK_WITH_LIB = $(BPFTOOL) gen object $@ $(filter $(LIB_FIRST),$^) $(filter-out $(LIB_FIRST),$^)

$(LIB_OBJ): $(LIB_NAMES:%=$(OUTPUT)/obj/%.bpf.o) | $(BPFTOOL)
	$(Q)$(BPFTOOL) gen object $@ $^

$(ASAN_LIB_OBJ): $(LIB_NAMES:%=$(OUTPUT)/asan/obj/%.bpf.o) | $(BPFTOOL)
	$(Q)$(BPFTOOL) gen object $@ $^

# A selftest object is its own program linked with the whole library.
$(OUTPUT)/tests/obj/%.bpf.o: $(LIBARENA_DIR)/tests/%.bpf.c $(BPF_DEPS)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(WARN_CFLAGS) $(DEP_FLAGS) -I$(LIBARENA_DIR)/tests -c $< -o $@

$(OUTPUT)/tests/%.bpf.o: $(OUTPUT)/tests/obj/%.bpf.o $(LIB_OBJ)
	$(Q)$(LINK_WITH_LIB)

$(OUTPUT)/asan/tests/obj/%.bpf.o: $(LIBARENA_DIR)/tests/%.bpf.c $(BPF_DEPS)
	$(if $(ASAN_CLANG_OK),,$(error $(ASAN_TOO_OLD)))
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(ASAN_CFLAGS) $(WARN_CFLAGS) $(DEP_FLAGS) -I$(LIBARENA_DIR)/tests -c $< -o $@

$(OUTPUT)/asan/tests/%.bpf.o: $(OUTPUT)/asan/tests/obj/%.bpf.o $(ASAN_LIB_OBJ)
	$(Q)$(LINK_WITH_LIB)

$(OUTPUT)/asan/bench/obj/%.bpf.o: $(LIBARENA_DIR)/bench/%.bpf.c $(BPF_DEPS)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(ASAN_CFLAGS) $(WARN_CFLAGS) $(DEP_FLAGS) -c $< -o $@

$(OUTPUT)/asan/bench/%.bpf.o: $(OUTPUT)/asan/bench/obj/%.bpf.o $(ASAN_LIB_OBJ)
	$(Q)$(LINK_WITH_LIB)

# Objects the verifier must reject: each shows what a user sees when that happens.
$(OUTPUT)/tests/load_fail/obj/%.bpf.o: $(LIBARENA_DIR)/tests/load_fail/%.bpf.c $(BPF_DEPS)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(WARN_CFLAGS) $(DEP_FLAGS) -c $< -o $@

# Linked alone: the 6.12 linker cannot merge a kfunc extern that two objects both call
# (README, known limits), and these objects call the arena kfuncs themselves.
$(OUTPUT)/tests/load_fail/%.bpf.o: $(OUTPUT)/tests/load_fail/obj/%.bpf.o | $(BPFTOOL)
	$(Q)$(BPFTOOL) gen object $@ $^

# Those named lib_* call the library instead, and are linked with it as users' objects are
# (the rule with the shorter stem wins).
$(OUTPUT)/tests/load_fail/lib_%.bpf.o: $(OUTPUT)/tests/load_fail/obj/lib_%.bpf.o $(LIB_OBJ) | \
		$(BPFTOOL)
	$(Q)$(LINK_WITH_LIB)

$(OUTPUT)/bench/obj/%.bpf.o: $(LIBARENA_DIR)/bench/%.bpf.c $(BPF_DEPS)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(WARN_CFLAGS) $(DEP_FLAGS) -c $< -o $@

$(OUTPUT)/bench/%.bpf.o: $(OUTPUT)/bench/obj/%.bpf.o $(LIB_OBJ)
	$(Q)$(LINK_WITH_LIB)

$(BENCH_BINS): $(OUTPUT)/bench/%: $(LIBARENA_DIR)/bench/%.c $(USER_LIB) $(LIBBPF_A)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(HOSTCC) $(USER_CFLAGS) $(WARN_CFLAGS) $< -o $@ $(USER_LIB) $(USER_LIBS)

$(OUTPUT)/cost/obj/%.bpf.o: $(LIBARENA_DIR)/tests/cost/%.bpf.c $(BPF_DEPS)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) $(WARN_CFLAGS) $(DEP_FLAGS) -c $< -o $@

$(OUTPUT)/cost/%.bpf.o: $(OUTPUT)/cost/obj/%.bpf.o $(LIB_OBJ)
	$(Q)$(LINK_WITH_LIB)

$(OUTPUT)/asan/cost/obj/%.bpf.o: $(LIBARENA_DIR)/tests/cost/%.bpf.c $(BPF_DEPS)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(ASAN_CFLAGS) $(WARN_CFLAGS) $(DEP_FLAGS) -c $< -o $@

$(OUTPUT)/asan/cost/%.bpf.o: $(OUTPUT)/asan/cost/obj/%.bpf.o $(ASAN_LIB_OBJ)
	$(Q)$(LINK_WITH_LIB)

$(COST_TOOL): $(LIBARENA_DIR)/tests/verifier_cost.c $(LIBBPF_A)
	$(Q)$(HOSTCC) $(USER_CFLAGS) $(WARN_CFLAGS) $< -o $@ $(USER_LIBS)

$(USER_TEST): $(LIBARENA_DIR)/tests/user_test.c $(USER_LIB) $(LIBBPF_A)
	$(Q)$(HOSTCC) $(USER_CFLAGS) $(WARN_CFLAGS) $< -o $@ $(USER_LIB) $(USER_LIBS)

$(OUTPUT)/examples/obj/%.bpf.o: $(LIBARENA_DIR)/examples/%.bpf.c $(BPF_DEPS) $(EXAMPLE_HDRS)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -I$(SCX_INCLUDE) $(WARN_CFLAGS) $(DEP_FLAGS) -c $< -o $@

$(OUTPUT)/asan/examples/obj/%.bpf.o: $(LIBARENA_DIR)/examples/%.bpf.c $(BPF_DEPS) $(EXAMPLE_HDRS)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CLANG) $(ASAN_CFLAGS) -I$(SCX_INCLUDE) $(WARN_CFLAGS) $(DEP_FLAGS) -c $< -o $@

$(OUTPUT)/asan/examples/%.bpf.o: $(OUTPUT)/asan/examples/obj/%.bpf.o $(ASAN_LIB_OBJ)
	$(Q)$(LINK_WITH_LIB)

$(OUTPUT)/examples/%.bpf.o: $(OUTPUT)/examples/obj/%.bpf.o $(LIB_OBJ)
	$(Q)$(LINK_WITH_LIB)

$(OUTPUT)/examples/%: $(LIBARENA_DIR)/examples/%.c $(USER_LIB) $(LIBBPF_A) $(EXAMPLE_HDRS)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(HOSTCC) $(USER_CFLAGS) -I$(SCX_INCLUDE) $(WARN_CFLAGS) $< -o $@ $(USER_LIB) \
		$(USER_LIBS)

$(OUTPUT)/examples/scx_simple: $(KSRC)/tools/sched_ext/scx_simple.bpf.c \
		$(KSRC)/tools/sched_ext/scx_simple.c
	$(Q)mkdir -p $(OUTPUT)/sched_ext
	$(Q)$(MAKE) --no-print-directory -s -C $(KSRC)/tools/sched_ext O=$(OUTPUT)/sched_ext \
		LLVM=$(SCX_LLVM) VMLINUX_BTF=$(VMLINUX_BTF) scx_simple >/dev/null
	$(Q)cp $(OUTPUT)/sched_ext/build/bin/scx_simple $@

$(OUTPUT)/user/%.o: $(LIBARENA_DIR)/userspace/%.c $(LIBBPF_A) \
		$(wildcard $(LIBARENA_DIR)/include/libarena/*.h)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(HOSTCC) $(USER_CFLAGS) $(WARN_CFLAGS) -c $< -o $@

$(USER_LIB): $(patsubst $(LIBARENA_DIR)/userspace/%.c,$(OUTPUT)/user/%.o,$(USER_SRCS))
	$(Q)rm -f $@ && ar rcs $@ $^

$(RUNNER): $(LIBARENA_DIR)/tests/runner.c $(USER_LIB) $(LIBBPF_A)
	$(Q)$(HOSTCC) $(USER_CFLAGS) $(WARN_CFLAGS) $< -o $@ $(USER_LIB) $(USER_LIBS)

$(TOOL_BINS): $(OUTPUT)/%: $(LIBARENA_DIR)/tools/%.c $(USER_LIB) $(LIBBPF_A)
	$(Q)$(HOSTCC) $(USER_CFLAGS) $(WARN_CFLAGS) $< -o $@ $(USER_LIB) $(USER_LIBS)

clean:
	$(Q)rm -rf $(OUTPUT)/obj $(OUTPUT)/headers $(OUTPUT)/asan $(OUTPUT)/tests \
		$(OUTPUT)/examples $(OUTPUT)/bench $(OUTPUT)/user $(LIB_OBJ) $(ASAN_LIB_OBJ) $(USER_LIB) $(RUNNER)

.PHONY: all headers lib asan-lib asan-skip tests runner examples bench clean print-bpf-cflags \
	print-asan-cflags print-bpftool print-runner print-user-cflags print-user-libs print-lib
FORCE:
.SECONDARY:
.DELETE_ON_ERROR:

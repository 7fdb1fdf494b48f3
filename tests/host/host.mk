# SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
#
# Host-native tests: library sources compiled as ordinary C and run under AddressSanitizer
# with UndefinedBehaviorSanitizer, and under ThreadSanitizer. Seconds, no VM.
#
#   make -f tests/host/host.mk OUTPUT=build/host run

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/../..)
OUTPUT ?= $(ROOT)/build/host
CC := gcc
# The arena's fixed address (1 << 44) lies in the sanitizers' shadow on x86-64: the heap's
# host test puts it where both ASan and TSan let programs map (TSan's PIE range).
CFLAGS := -g -O1 -Wall -Werror -Wno-unknown-pragmas -DARENA_USER_BASE=0x560000000000ull \
	-D_GNU_SOURCE -I$(ROOT)/include -I$(ROOT)/tests/host
SAN_asan := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
SAN_tsan := -fsanitize=thread
SHIM := -include $(ROOT)/tests/host/host_shim.h

# test name -> library sources it links
test_common_SRCS :=
test_log_ring_SRCS := $(ROOT)/src/log.bpf.c $(ROOT)/userspace/log_reader.c
test_buddy_SRCS := $(ROOT)/src/buddy.bpf.c $(ROOT)/src/log.bpf.c

test_heap_SRCS := $(ROOT)/src/heap.bpf.c $(ROOT)/src/buddy.bpf.c $(ROOT)/src/log.bpf.c
test_rbtree_SRCS := $(ROOT)/src/rbtree.bpf.c
test_spmc_SRCS := $(ROOT)/src/spmc.bpf.c
test_spinlock_SRCS :=
test_mpmcq_SRCS := $(ROOT)/src/mpmcq.bpf.c
test_mpsc_SRCS := $(ROOT)/src/mpsc.bpf.c
test_minheap_SRCS := $(ROOT)/src/minheap.bpf.c
test_list_SRCS :=
test_hashmap_SRCS := $(ROOT)/src/hashmap.bpf.c
test_btree_SRCS := $(ROOT)/src/btree.bpf.c
# The same tests on 14-key nodes (twice as high), destroy in slices of 100 nodes.
test_btree4_SRCS := $(ROOT)/src/btree.bpf.c
test_btree4_CFLAGS := -DBT_SEARCH_STEPS=4 -DBT_DESTROY_MAX=100
test_stderr_match_SRCS := $(ROOT)/userspace/expect.c

# Every tests/host/test_*.c, so that each prefix of the patch series builds its own.
TESTS := $(sort $(notdir $(basename $(wildcard $(ROOT)/tests/host/test_*.c))))
BINS := $(foreach t,$(TESTS),$(OUTPUT)/$(t).asan $(OUTPUT)/$(t).tsan)

all: $(BINS)

HOST_DEPS := $(wildcard $(ROOT)/include/libarena/*.h $(ROOT)/src/*.h $(ROOT)/src/*/*.c \
	$(ROOT)/tests/host/*.[ch])

define host_test
$(OUTPUT)/$(1).$(2): $(ROOT)/tests/host/$(1).c $($(1)_SRCS) $(HOST_DEPS)
	@mkdir -p $(OUTPUT)
	@$(CC) $(CFLAGS) $($(1)_CFLAGS) $(SAN_$(2)) $(SHIM) -x c $($(1)_SRCS) -x none $$< \
		-o $$@ -lpthread
endef
$(foreach t,$(TESTS),$(eval $(call host_test,$(t),asan)) $(eval $(call host_test,$(t),tsan)))

# Every binary runs even when one fails; each prints its "N passed, N failed" line.
# Without address randomisation, so that a failing run repeats with the same addresses.
run: $(BINS)
	@rc=0; for b in $(BINS); do \
		echo "== host: $$(basename $$b)"; \
		TSAN_OPTIONS=halt_on_error=1 setarch $$(uname -m) -R $$b || rc=1; \
	done; exit $$rc

.PHONY: all run

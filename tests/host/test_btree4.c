// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* test_btree.c on 14-key nodes and with a small BT_DESTROY_MAX (see host.mk). */
#define SUITE "btree4"
#define TEST_DESTROY_AGAIN
#include "test_btree.c"

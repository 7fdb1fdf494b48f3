// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * libarena_stderr_match() (userspace/expect.c), the runner's check of __stderr() tags:
 * literal text, {{...}} regular expressions, order, and the sanitizer's report lines
 * against the expectations upstream's sanitizer tests carry.
 */
#include <errno.h>
#include <libarena/userspace.h>
#include "check.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* What libarena_asan_print() writes for an out-of-bounds write of one byte. */
static const char report[] =
	"log: before\n"
	"asan: out-of-bounds write of 1 byte at 0x100000a31: out of bounds by 1 byte past the end of the 48-byte block at 0x100000a00\n"
	"asan:   by asan_test_x:oob+0x2c (test_asan.bpf.c:120) on CPU 1\n"
	"Memory violation for address 0x100000a30 for write of size 1\n"
	"CPU: 1 UID: 0 PID: 321 Comm: runner\n"
	"Call trace:\n"
	"\tasan_test_x:oob+0x2c (test_asan.bpf.c:120)\n"
	"log: after\n";

/*
 * Expectations in the style of upstream's sanitizer tests: the access, the task, and a
 * trace whose lines are either "func+0xoff/0xlen" or indented text.
 */
#define UPSTREAM_ACCESS "Memory violation for address {{.*}} for write of size {{[1-8]}}"

static const char *const upstream[] = {
	UPSTREAM_ACCESS,
	"CPU: {{[0-9]+}} UID: {{[0-9]+}} PID: {{[0-9]+}} Comm: {{[^ ]+}}",
	"Call trace:\n"
	"{{(([_a-zA-Z][_a-zA-Z0-9]*\\+0x[0-9a-f]+/0x[0-9a-f]+|[ \t]+[^\n]+)\n)+}}log: after",
};

static int test_upstream_expectations(void)
{
	CHECK(libarena_stderr_match(upstream, N(upstream), report, NULL) == 0, "");
	return 0;
}

static int test_literal_text(void)
{
	/* Characters special to regular expressions are literal outside {{ }}. */
	static const char *const ok[] = { "(test_asan.bpf.c:120)", "0x100000a30 for write", "[" };
	const char *text = "at (test_asan.bpf.c:120): 0x100000a30 for write [x]";
	static const char *const dot[] = { "a.c" };

	CHECK(libarena_stderr_match(ok, N(ok), text, NULL) == 0, "");
	CHECK(libarena_stderr_match(dot, 1, "abc", NULL) == 1, "a dot is a dot");
	CHECK(libarena_stderr_match(dot, 1, "a.c", NULL) == 0, "");
	/* No message: nothing to miss. */
	CHECK(libarena_stderr_match(NULL, 0, "", NULL) == 0, "");
	return 0;
}

static int test_regex_parts(void)
{
	static const char *const size[] = { "of size {{[0-9]+}}" };
	static const char *const alt[] = { "kind: {{read|write}} done" };
	static const char *const line[] = { "PID: {{.*}}Comm" };

	CHECK(libarena_stderr_match(size, 1, "of size 16\n", NULL) == 0, "");
	CHECK(libarena_stderr_match(size, 1, "of size x\n", NULL) == 1, "");
	/* An alternation stays inside its part. */
	CHECK(libarena_stderr_match(alt, 1, "kind: write done", NULL) == 0, "");
	CHECK(libarena_stderr_match(alt, 1, "write done", NULL) == 1, "");
	/* . does not match a newline: a message is matched within lines it names. */
	CHECK(libarena_stderr_match(line, 1, "PID: 1\nComm", NULL) == 1, "");
	CHECK(libarena_stderr_match(line, 1, "PID: 1 Comm", NULL) == 0, "");
	return 0;
}

static int test_order(void)
{
	static const char *const in_order[] = { "first", "second", "third" };
	static const char *const swapped[] = { "second", "first" };
	static const char *const twice[] = { "line", "line" };

	CHECK(libarena_stderr_match(in_order, 3, "first\nsecond\nthird\n", NULL) == 0, "");
	CHECK(libarena_stderr_match(swapped, 2, "first\nsecond\n", NULL) == 2,
	      "the second message must come after the first");
	/* Each message is searched from where the previous match ended. */
	CHECK(libarena_stderr_match(twice, 2, "line\n", NULL) == 2, "");
	CHECK(libarena_stderr_match(twice, 2, "line\nline\n", NULL) == 0, "");
	/* Both on one line. */
	CHECK(libarena_stderr_match(in_order, 2, "first second", NULL) == 0, "");
	return 0;
}

static int test_anchors(void)
{
	static const char *const bol[] = { "a", "{{^b}}" };

	/* ^ after the previous match, mid-line, is no line start. */
	CHECK(libarena_stderr_match(bol, 2, "ab\n", NULL) == 2, "");
	CHECK(libarena_stderr_match(bol, 2, "a\nb\n", NULL) == 0, "");
	return 0;
}

static int test_mismatches(void)
{
	static const char *const wrong[] = {
		"Memory violation for address {{.*}} for read of size 1",
	};
	static const char *const uid[] = { UPSTREAM_ACCESS, "CPU: {{[0-9]+}} UID: 1000 PID" };
	static const char *const bad[] = { "ok", "{{[unclosed}}" };
	static const char *const open_part[] = { "{{never closed" };
	int which = 0;

	CHECK(libarena_stderr_match(wrong, 1, report, NULL) == 1, "");
	CHECK(libarena_stderr_match(uid, 2, report, NULL) == 2, "");
	CHECK(libarena_stderr_match(upstream, N(upstream), "", NULL) == 1, "");
	CHECK(libarena_stderr_match(bad, 2, "ok", &which) == -EINVAL && which == 2, "");
	CHECK(libarena_stderr_match(open_part, 1, "x", &which) == -EINVAL && which == 1, "");
	return 0;
}

int main(void)
{
	host_begin(true);
	host_run("stderr_match", "upstream_expectations", test_upstream_expectations);
	host_run("stderr_match", "literal_text", test_literal_text);
	host_run("stderr_match", "regex_parts", test_regex_parts);
	host_run("stderr_match", "order", test_order);
	host_run("stderr_match", "anchors", test_anchors);
	host_run("stderr_match", "mismatches", test_mismatches);
	return host_summary();
}

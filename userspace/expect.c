// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * __stderr() expectations: literal text with {{...}} regular expressions, matched in
 * order against what a test wrote to stderr.
 */
#include <errno.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <libarena/userspace.h>

/* The extended regular expression of one message: its literal parts escaped. */
static char *message_regex(const char *msg)
{
	size_t len = strlen(msg);
	char *re = malloc(2 * len + 1), *o = re;
	const char *p = msg, *end;

	if (!re)
		return NULL;
	while (*p) {
		if (p[0] == '{' && p[1] == '{') {
			end = strstr(p + 2, "}}");
			if (!end) {
				free(re);
				return NULL;
			}
			/* Grouped, so that an alternation stays inside its part. */
			*o++ = '(';
			memcpy(o, p + 2, end - p - 2);
			o += end - p - 2;
			*o++ = ')';
			p = end + 2;
			continue;
		}
		if (strchr(".[]{}()\\*+?^$|", *p))
			*o++ = '\\';
		*o++ = *p++;
	}
	*o = 0;
	return re;
}

int libarena_stderr_match(const char *const *msgs, int n, const char *text, int *bad)
{
	size_t from = 0;
	int i;

	if (!text)
		text = "";
	for (i = 0; i < n; i++) {
		char *re = message_regex(msgs[i]);
		regmatch_t m;
		regex_t rx;
		int flags = 0, err;

		if (!re || regcomp(&rx, re, REG_EXTENDED | REG_NEWLINE)) {
			free(re);
			if (bad)
				*bad = i + 1;
			return -EINVAL;
		}
		free(re);
		/* From the middle of a line, ^ must not match. */
		if (from && text[from - 1] != '\n')
			flags |= REG_NOTBOL;
		err = regexec(&rx, text + from, 1, &m, flags);
		regfree(&rx);
		if (err)
			return i + 1;
		from += m.rm_eo;
	}
	return 0;
}

// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Sanitizer reports, printed by user space. The runtime (src/asan.bpf.c) records each
 * report in the arena with the return address into the JIT-ed code that made the bad
 * access; here that address becomes a program, a function and a source line, from the
 * jited line info the kernel keeps for every loaded program (bpf_prog_info).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>

struct asan_state *libarena_asan_start(struct bpf_object *obj, struct asan_init_args *args)
{
	struct asan_init_args defaults = {};
	struct bpf_program *prog;
	struct asan_state *st;
	int err, ret;

	prog = bpf_object__find_program_by_name(obj, "asan_init");
	if (!prog) {
		errno = ENOENT;
		return NULL;
	}
	if (!args)
		args = &defaults;
	if (!args->arena_globals_pages) {
		err = libarena_get_globals_pages(bpf_program__fd(prog), 0,
						 &args->arena_globals_pages);
		if (err) {
			errno = -err;
			return NULL;
		}
	}
	err = libarena_prog_run(prog, args, sizeof(*args), &ret);
	if (!err)
		err = ret;
	if (err || !args->state) {
		errno = err ? -err : ENOENT;
		return NULL;
	}
	st = (struct asan_state *)(uintptr_t)args->state;
	if (st->magic != ASAN_STATE_MAGIC) {
		errno = EUCLEAN;
		return NULL;
	}
	return st;
}

int libarena_asan_init(int arena_asan_init_fd, int asan_init_fd, size_t arena_all_pages)
{
	/*
	 * All of our struct, zeroed (the defaults): 6.12 refuses a context smaller than
	 * what the program reads, and ours reads more than upstream's two fields.
	 */
	struct asan_init_args args = { .arena_all_pages = arena_all_pages };
	u64 pages;
	int ret;

	ret = libarena_get_globals_pages(arena_asan_init_fd, arena_all_pages, &pages);
	if (ret)
		return ret;
	args.arena_globals_pages = pages;
	return libarena_run_prog_args(asan_init_fd, &args, sizeof(args));
}

static const char *kind_name(int kind)
{
	switch (kind) {
	case ASAN_OUT_OF_BOUNDS: return "out-of-bounds";
	case ASAN_USE_AFTER_FREE: return "use-after-free";
	case ASAN_DOUBLE_FREE: return "double free";
	case ASAN_INVALID_FREE: return "invalid free";
	case ASAN_WILD_ACCESS: return "wild access";
	default: return "bad access";
	}
}

static const char *plural(u64 n)
{
	return n == 1 ? "" : "s";
}

int libarena_asan_describe(const struct asan_report *r, char *buf, size_t len)
{
	const char *rw = r->flags & ASAN_F_WRITE ? "write" : "read";
	bool known = r->flags & ASAN_F_BLOCK;
	u64 end = r->block + r->block_size;
	char block[128] = "";
	int n;

	if (known && (r->flags & ASAN_F_FREED) && !r->block_size)
		snprintf(block, sizeof(block),
			 "the freed block at 0x%llx (freed too long ago to know its size)",
			 r->block);
	else if (known)
		snprintf(block, sizeof(block), "the %s%u-byte block at 0x%llx",
			 r->flags & ASAN_F_FREED ? "freed " : "", r->block_size, r->block);

	switch (r->kind) {
	case ASAN_DOUBLE_FREE:
		return snprintf(buf, len, "double free of 0x%llx%s%s", r->addr,
				known ? ": " : "", known ? block : "");
	case ASAN_INVALID_FREE:
		if (known && r->addr != r->block)
			return snprintf(buf, len, "invalid free of 0x%llx: %llu bytes into %s",
					r->addr, r->addr - r->block, block);
		return snprintf(buf, len, "invalid free of 0x%llx: no block starts there",
				r->addr);
	default:
		break;
	}
	n = snprintf(buf, len, "%s %s of %u byte%s at 0x%llx", kind_name(r->kind), rw,
		     r->size, plural(r->size), r->access);
	if (n < 0 || (size_t)n >= len)
		return n;
	buf += n;
	len -= n;
	if (r->kind == ASAN_OUT_OF_BOUNDS && known && (r->flags & ASAN_F_BEFORE))
		return n + snprintf(buf, len, ": out of bounds by %llu byte%s before %s",
				    r->block - r->addr, plural(r->block - r->addr), block);
	if (r->kind == ASAN_OUT_OF_BOUNDS && known && r->addr >= end)
		return n + snprintf(buf, len, ": out of bounds by %llu byte%s past the end of %s",
				    r->addr - end + 1, plural(r->addr - end + 1), block);
	if (r->kind == ASAN_USE_AFTER_FREE && known)
		return n + snprintf(buf, len, ": %llu bytes into %s", r->addr - r->block, block);
	if (r->kind == ASAN_WILD_ACCESS)
		return n + snprintf(buf, len, ": memory no block holds (%s)",
				    r->shadow == ASAN_RELEASED ? "given back to the kernel" :
				    r->shadow == ASAN_UNALLOCATED ? "never allocated" :
				    r->shadow == ASAN_FREED ? "freed" : "poisoned");
	if (known)
		return n + snprintf(buf, len, ": in %s", block);
	return n;
}

/* The program, function and line of a JIT-ed address, from one program's info. */
int libarena_asan_where_fd(int fd, const char *prog_name, u64 ip, char *buf, size_t len)
{
	struct bpf_prog_info info = {};
	u32 info_len = sizeof(info), nfuncs, nlines, nfi, rec, fi_rec;
	u64 *ksyms = NULL, *jlines = NULL;
	u32 *flens = NULL;
	char *lines = NULL, *finfo = NULL;
	struct btf *btf = NULL;
	int ret = -ENOENT, f = -1, best = -1;
	const char *file = "?", *func = "?";
	u32 line = 0;

	if (bpf_prog_get_info_by_fd(fd, &info, &info_len))
		return -errno;
	nfuncs = info.nr_jited_ksyms;
	nlines = info.nr_jited_line_info;
	nfi = info.nr_func_info;
	rec = info.line_info_rec_size;
	fi_rec = info.func_info_rec_size;
	if (!nfuncs)
		return -ENOENT;
	ksyms = calloc(nfuncs, sizeof(*ksyms));
	flens = calloc(nfuncs, sizeof(*flens));
	jlines = calloc(nlines ? nlines : 1, sizeof(*jlines));
	lines = calloc(nlines ? nlines : 1, rec ? rec : 1);
	finfo = calloc(nfi ? nfi : 1, fi_rec ? fi_rec : 1);
	if (!ksyms || !flens || !jlines || !lines || !finfo) {
		ret = -ENOMEM;
		goto out;
	}
	memset(&info, 0, sizeof(info));
	info.nr_jited_ksyms = nfuncs;
	info.jited_ksyms = (uintptr_t)ksyms;
	info.nr_jited_func_lens = nfuncs;
	info.jited_func_lens = (uintptr_t)flens;
	info.nr_jited_line_info = nlines;
	info.jited_line_info = (uintptr_t)jlines;
	info.jited_line_info_rec_size = sizeof(u64);
	info.nr_line_info = nlines;
	info.line_info = (uintptr_t)lines;
	info.line_info_rec_size = rec;
	info.nr_func_info = nfi;
	info.func_info = (uintptr_t)finfo;
	info.func_info_rec_size = fi_rec;
	info_len = sizeof(info);
	if (bpf_prog_get_info_by_fd(fd, &info, &info_len)) {
		ret = -errno;
		goto out;
	}
	for (u32 i = 0; i < nfuncs; i++)
		if (ip >= ksyms[i] && ip < ksyms[i] + flens[i])
			f = i;
	if (f < 0)
		goto out;
	/* The call is before the return address: the last line that starts before it. */
	for (u32 i = 0; i < nlines; i++)
		if (jlines[i] < ip && jlines[i] >= ksyms[f] &&
		    (best < 0 || jlines[i] >= jlines[best]))
			best = i;
	btf = btf__load_from_kernel_by_id(info.btf_id);
	if (btf && best >= 0) {
		struct bpf_line_info *li = (void *)(lines + (size_t)best * rec);

		file = btf__name_by_offset(btf, li->file_name_off) ?: "?";
		line = BPF_LINE_INFO_LINE_NUM(li->line_col);
		if (strrchr(file, '/'))
			file = strrchr(file, '/') + 1;
	}
	if (btf && (u32)f < nfi) {
		struct bpf_func_info *fi = (void *)(finfo + (size_t)f * fi_rec);
		const struct btf_type *t = btf__type_by_id(btf, fi->type_id);

		if (t)
			func = btf__name_by_offset(btf, t->name_off) ?: "?";
	}
	snprintf(buf, len, "%s:%s+0x%llx (%s:%u)", prog_name, func, ip - ksyms[f], file, line);
	ret = 0;
out:
	btf__free(btf);
	free(ksyms);
	free(flens);
	free(jlines);
	free(lines);
	free(finfo);
	return ret;
}

int libarena_asan_where(struct bpf_object *obj, u64 ip, char *buf, size_t len)
{
	struct bpf_program *prog;

	if (!ip)
		return -ENOENT;
	bpf_object__for_each_program(prog, obj) {
		int fd = bpf_program__fd(prog);

		if (fd >= 0 && !libarena_asan_where_fd(fd, bpf_program__name(prog), ip, buf, len))
			return 0;
	}
	return -ENOENT;
}

/*
 * The lines the upstream libarena's sanitizer prints (its report, then the kernel's
 * stack dump header and trace), so that tests written for it find what their __stderr()
 * expectations name. A bad free is no access: it gets the task and where, without a
 * "Memory violation" line.
 */
static void print_upstream(const struct asan_report *r, const char *where, FILE *out)
{
	char comm[sizeof(r->comm) + 1];

	if (r->kind != ASAN_DOUBLE_FREE && r->kind != ASAN_INVALID_FREE)
		fprintf(out, "Memory violation for address 0x%llx for %s of size %u\n",
			(unsigned long long)r->access, r->flags & ASAN_F_WRITE ? "write" : "read",
			r->size);
	memcpy(comm, r->comm, sizeof(r->comm));
	comm[sizeof(r->comm)] = 0;
	if (r->flags & ASAN_F_TASK)
		fprintf(out, "CPU: %u UID: %u PID: %u Comm: %s\n", r->cpu, r->uid, r->pid, comm);
	else
		fprintf(out, "CPU: %u UID: ? PID: %u Comm: ?\n", r->cpu, r->pid);
	fprintf(out, "Call trace:\n\t%s\n", where);
}

int libarena_asan_print(struct bpf_object *obj, struct asan_state *st, FILE *out)
{
	u64 made, from, seq;
	struct asan_report r;
	char line[512], where[256];
	int printed = 0;

	if (!st)
		return -EINVAL;
	made = __atomic_load_n(&st->nr_reports, __ATOMIC_ACQUIRE);
	from = st->printed;
	if (made < from)
		from = made;	/* asan_init ran again */
	if (made - from > ASAN_MAX_REPORTS) {
		fprintf(out, "asan: %llu reports not kept (only the last %d are)\n",
			made - from - ASAN_MAX_REPORTS, ASAN_MAX_REPORTS);
		from = made - ASAN_MAX_REPORTS;
	}
	for (; from < made; from++) {
		memcpy(&r, &st->reports[from % ASAN_MAX_REPORTS], sizeof(r));
		seq = __atomic_load_n(&st->reports[from % ASAN_MAX_REPORTS].seq, __ATOMIC_ACQUIRE);
		if (r.seq != from + 1 || seq != from + 1) {
			fprintf(out, "asan: report %llu was overwritten while read\n", from + 1);
			continue;
		}
		libarena_asan_describe(&r, line, sizeof(line));
		fprintf(out, "asan: %s\n", line);
		if (libarena_asan_where(obj, r.ip, where, sizeof(where)))
			snprintf(where, sizeof(where),
				 r.ip ? "0x%llx (in no program of this object)" :
				 "an unknown place", r.ip);
		fprintf(out, "asan:   by %s on CPU %u\n", where, r.cpu);
		print_upstream(&r, where, out);
		printed++;
	}
	st->printed = made;
	return printed;
}

// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * arena-top: what is inside a running program's arena, from outside it.
 *
 *   arena-top [-w] [-n COUNT] [-d] (-m MAP_ID | -p PINNED_PATH | -P PID)
 *
 *   -m, -p, -P   the arena map by id, by pinned path, or the first arena the process
 *                PID holds (its loader)
 *   -w           refresh every second, as top does (-n: that many times; default
 *                once without -w, until interrupted with it)
 *   -d           drain the log ring (its lines are then gone for the loader): the
 *                arena is mapped writable for that; otherwise read-only, and the ring
 *                is only counted
 *
 * It finds the library's state through the BTF of a program that uses the map (the
 * arena globals' section, .addr_space.1, which 6.12's libbpf places at the start of the
 * arena), maps the arena at the address the program's loader mapped it (the map's
 * map_extra) and prints the allocators (the per-CPU heaps and their reserves, the buddy
 * and its CPU caches), the log ring and the sanitizer's reports. Every structure is
 * checked by its magic before it is read and every walk is bounded, so a program that
 * wrote over its own arena gets "not initialised" or "damaged", never a crash. Only
 * memory the library keeps mapped is read (a read of an arena page nobody mapped would
 * map one).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>
#include <libarena/buddy.h>

/* BPF_MAP_TYPE_ARENA (uapi since 6.9): the build host's linux/bpf.h may be older. */
#define MAP_TYPE_ARENA	33

/* The library's arena globals arena-top reads, by their names in the program's BTF. */
struct view {
	int map_fd;
	struct bpf_map_info map;
	u32 prog_ids[8];
	int nr_progs;
	char prog_names[8][BPF_OBJ_NAME_LEN];
	void *base;
	size_t size;
	struct arena_heap_global *heap;
	struct buddy *buddy;
	struct arena_log *log;
	struct asan_state *asan;
	u64 *quarantine;	/* asan_quarantine[ASAN_QUARANTINE_MAX] */
};

static int die(const char *what, int err)
{
	fprintf(stderr, "arena-top: %s: %s\n", what, strerror(err));
	return 1;
}

/* The first arena map the process pid holds: its id, from /proc/PID/fdinfo. */
static int arena_of_pid(int pid, u32 *id)
{
	char path[320], line[128];
	struct dirent *d;
	DIR *dir;
	int found = 0;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo", pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while (!found && (d = readdir(dir))) {
		unsigned int type = 0, map_id = 0;
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", pid, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			if (sscanf(line, "map_type: %u", &type) == 1)
				continue;
			if (sscanf(line, "map_id: %u", &map_id) == 1)
				continue;
		}
		fclose(f);
		if (type == MAP_TYPE_ARENA && map_id) {
			*id = map_id;
			found = 1;
		}
	}
	closedir(dir);
	return found ? 0 : -ENOENT;
}

/* The programs that use the map: their ids and names (for the header and reports). */
static int find_progs(struct view *v)
{
	u32 id = 0;

	while (!bpf_prog_get_next_id(id, &id) && v->nr_progs < 8) {
		struct bpf_prog_info info = {};
		u32 len = sizeof(info), maps[64];
		int fd = bpf_prog_get_fd_by_id(id);

		if (fd < 0)
			continue;
		info.nr_map_ids = 64;
		info.map_ids = (u64)(uintptr_t)maps;
		if (!bpf_prog_get_info_by_fd(fd, &info, &len) && info.btf_id) {
			for (u32 i = 0; i < info.nr_map_ids && i < 64; i++) {
				if (maps[i] != v->map.id)
					continue;
				v->prog_ids[v->nr_progs] = id;
				memcpy(v->prog_names[v->nr_progs], info.name, BPF_OBJ_NAME_LEN);
				v->nr_progs++;
				break;
			}
		}
		close(fd);
	}
	return v->nr_progs ? 0 : -ENOENT;
}

/* The offsets of the library's globals in .addr_space.1, from the first program's BTF. */
static int find_globals(struct view *v)
{
	struct bpf_prog_info info = {};
	u32 len = sizeof(info), n;
	int fd = bpf_prog_get_fd_by_id(v->prog_ids[0]), err = -ENOENT;
	struct btf *btf;

	if (fd < 0)
		return -errno;
	if (bpf_prog_get_info_by_fd(fd, &info, &len)) {
		close(fd);
		return -errno;
	}
	close(fd);
	btf = btf__load_from_kernel_by_id(info.btf_id);
	if (!btf)
		return -errno;
	n = btf__type_cnt(btf);
	for (u32 id = 1; id < n; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		const struct btf_var_secinfo *vs;
		const char *name = btf__name_by_offset(btf, t->name_off);

		if (!btf_is_datasec(t) || !name || strcmp(name, ".addr_space.1"))
			continue;
		vs = btf_var_secinfos(t);
		for (u32 i = 0; i < btf_vlen(t); i++, vs++) {
			const char *var = btf__name_by_offset(btf, btf__type_by_id(btf,
								vs->type)->name_off);
			void *at = (char *)v->base + vs->offset;

			if (!var || vs->offset + vs->size > v->size)
				continue;
			if (!strcmp(var, "arena_heap_global"))
				v->heap = at;
			else if (!strcmp(var, "buddy"))
				v->buddy = at;
			else if (!strcmp(var, "arena_log_ring"))
				v->log = at;
			else if (!strcmp(var, "asan_state"))
				v->asan = at;
			else if (!strcmp(var, "asan_quarantine") &&
				 vs->size == ASAN_QUARANTINE_MAX * sizeof(u64))
				v->quarantine = at;
		}
		err = 0;
		break;
	}
	btf__free(btf);
	return err;
}

static void print_log(struct view *v, bool drain)
{
	struct arena_log *l = v->log;
	u64 head, tail;

	if (!l || l->magic != ARENA_LOG_MAGIC || l->nr_slots != ARENA_LOG_SLOTS) {
		printf("log: %s\n", l ? "not initialised or damaged" : "none in this program");
		return;
	}
	head = READ_ONCE(l->head);
	tail = READ_ONCE(l->tail);
	printf("log: %llu lines written, %llu dropped, %llu truncated; %llu slots unread\n",
	       (unsigned long long)l->written, (unsigned long long)l->dropped,
	       (unsigned long long)l->truncated,
	       (unsigned long long)(head >= tail ? head - tail : 0));
	if (drain)
		libarena_log_print(l, stdout, stdout);
}

static void print_asan(struct view *v)
{
	struct asan_state *st = v->asan;
	u64 made, from;
	char line[512], where[256];

	if (!st)
		return;			/* the plain build */
	if (st->magic != ASAN_STATE_MAGIC) {
		printf("sanitizer: not started\n");
		return;
	}
	made = READ_ONCE(st->nr_reports);
	printf("sanitizer: %llu reports; %llu shadow pages mapped\n", (unsigned long long)made,
	       (unsigned long long)st->shadow_pages);
	from = made > 5 ? made - 5 : 0;
	for (; from < made; from++) {
		struct asan_report r;

		memcpy(&r, &st->reports[from % ASAN_MAX_REPORTS], sizeof(r));
		if (r.seq != from + 1)
			continue;
		libarena_asan_describe(&r, line, sizeof(line));
		snprintf(where, sizeof(where), "0x%llx", (unsigned long long)r.ip);
		for (int i = 0; i < v->nr_progs; i++) {
			int fd = bpf_prog_get_fd_by_id(v->prog_ids[i]);

			if (fd < 0)
				continue;
			i = libarena_asan_where_fd(fd, v->prog_names[i], r.ip, where,
						   sizeof(where)) ? i : v->nr_progs;
			close(fd);
		}
		printf("  #%llu %s\n    by %s on CPU %u\n", (unsigned long long)r.seq, line, where,
		       r.cpu);
	}
}

static void show(struct view *v, bool drain)
{
	struct arena_heap_stats sum;
	int heaps;

	printf("arena map %u (%s): %u pages at %p; programs:", v->map.id, v->map.name,
	       v->map.max_entries, v->base);
	for (int i = 0; i < v->nr_progs; i++)
		printf(" %s", v->prog_names[i]);
	printf("%s\n", v->nr_progs == 8 ? " ..." : "");
	if (v->heap && v->heap->magic == HEAP_GLOBAL_MAGIC) {
		struct arena_heap_global *g = v->heap;
		long long out, held = 0;

		/* What arena_heap_outstanding() counts, from the same counters. */
		heaps = libarena_heap_totals(g, &sum);
		out = (long long)(g->large_allocs - g->large_frees) + (long long)sum.allocs -
		      (long long)(sum.frees + sum.remote_frees) - (long long)g->orphan_frees;
		for (int i = 0; v->quarantine && i < ASAN_QUARANTINE_MAX; i++)
			held += !!READ_ONCE(v->quarantine[i]);
		printf("objects out: %lld (arena_malloc's, not yet arena_free'd%s) on %d heaps\n",
		       out - held, v->quarantine ? ", the quarantine's left out" : "", heaps);
		libarena_heap_stats_print(g, stdout);
	} else {
		printf("heap: %s\n",
		       v->heap ? "not initialised or damaged" : "none in this program");
	}
	if (v->buddy)
		libarena_buddy_stats_print(v->buddy, stdout);
	else
		printf("buddy: none in this program\n");
	print_log(v, drain);
	print_asan(v);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct view v = { .map_fd = -1 };
	u32 len = sizeof(v.map), id = 0;
	int opt, pid = 0, count = -1, err;
	bool watch = false, drain = false;
	const char *pinned = NULL;

	while ((opt = getopt(argc, argv, "m:p:P:wn:d")) != -1) {
		switch (opt) {
		case 'm':
			id = strtoul(optarg, NULL, 0);
			break;
		case 'p':
			pinned = optarg;
			break;
		case 'P':
			pid = atoi(optarg);
			break;
		case 'w':
			watch = true;
			break;
		case 'n':
			count = atoi(optarg);
			break;
		case 'd':
			drain = true;
			break;
		default:
			fprintf(stderr,
				"usage: arena-top [-w] [-n COUNT] [-d] (-m MAP_ID | -p PINNED | -P PID)\n");
			return 2;
		}
	}
	err = pid ? arena_of_pid(pid, &id) : 0;
	if (err)
		return die("no arena map in that process", -err);
	v.map_fd = pinned ? bpf_obj_get(pinned) : id ? bpf_map_get_fd_by_id(id) : -EINVAL;
	if (v.map_fd < 0)
		return die("the arena map", pinned || id ? errno : EINVAL);
	if (bpf_map_get_info_by_fd(v.map_fd, &v.map, &len))
		return die("map info", errno);
	if (v.map.type != MAP_TYPE_ARENA)
		return die("not an arena map", EINVAL);
	if (!v.map.map_extra)
		return die("the arena has no fixed address (map_extra) to map it at", EINVAL);
	v.size = (size_t)v.map.max_entries * sysconf(_SC_PAGESIZE);
	v.base = mmap((void *)(uintptr_t)v.map.map_extra, v.size,
		      PROT_READ | (drain ? PROT_WRITE : 0), MAP_SHARED | MAP_FIXED_NOREPLACE,
		      v.map_fd, 0);
	if (v.base == MAP_FAILED)
		return die("mapping the arena", errno);
	err = find_progs(&v);
	if (err)
		return die("no program uses this arena", -err);
	err = find_globals(&v);
	if (err)
		return die("no arena globals in the program's BTF", -err);
	if (count < 0)
		count = watch ? 0 : 1;
	for (int i = 0; !count || i < count; i++) {
		if (i) {
			sleep(1);
			if (watch)
				printf("\033[H\033[2J");
		}
		show(&v, drain);
	}
	return 0;
}

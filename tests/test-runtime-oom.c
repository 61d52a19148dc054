/*
 * tests/test-runtime-oom: libcopus when memory runs out. copus_init, as a
 * job resuming from its checkpoint runs it, is run again and again with its
 * n-th allocation failing, for every n until it needs no more: each run
 * either succeeds or fails with an error, and a run that fails leaves
 * nothing allocated behind (nor does copus_finalize after one that worked).
 *
 * The program replaces malloc, calloc, realloc and free (glibc lets a
 * program do so; libcopus and json-c then allocate through them), fails
 * the n-th of libcopus's own allocations, and counts the blocks allocated
 * (by anyone) while a run is watched. It skips under
 * AddressSanitizer, which replaces them itself.
 */
#include <copus_config.h>

#define _GNU_SOURCE 1
#include <dlfcn.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <copus/copus.h>

#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
#define COPUS_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COPUS_TEST_ASAN 1
#endif
#endif

#ifndef COPUS_TEST_ASAN
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

/* The blocks allocated while watched and not yet freed (open addressing). */
#define LIVE_CAP (1 << 16)
static void *_live[LIVE_CAP];
static long _nlive;
static bool _watch;
/* Allocations left before the one that fails (0: none fails). */
static long _countdown;
static bool _failed;

static size_t _slot(const void *p)
{
	return ((uintptr_t)p >> 4) * 2654435761u % LIVE_CAP;
}

static void _track(void *p)
{
	size_t i;

	if (!_watch || p == NULL)
		return;
	for (i = _slot(p); _live[i] != NULL && _live[i] != (void *)1;
	     i = (i + 1) % LIVE_CAP)
		;
	_live[i] = p;
	_nlive++;
}

static void _untrack(void *p)
{
	size_t i;

	if (p == NULL || _nlive == 0)
		return;
	for (i = _slot(p); _live[i] != NULL; i = (i + 1) % LIVE_CAP)
		if (_live[i] == p) {
			_live[i] = (void *)1; /* a tombstone */
			_nlive--;
			return;
		}
}

/*
 * Whether this allocation, made by the code at caller, is the one that
 * fails. Only libcopus's own allocations count and fail: json-c 0.16
 * crashes when its own fail (json_object_object_add_ex takes strlen of the
 * NULL it got), which is json-c's to mend.
 */
static void *_base;

static bool _fail(const void *caller)
{
	Dl_info info;

	if (_countdown <= 0 || !dladdr(caller, &info) ||
	    info.dli_fbase != _base || --_countdown > 0)
		return false;
	_failed = true;
	return true;
}

void *malloc(size_t n)
{
	void *p = _fail(__builtin_return_address(0)) ? NULL : __libc_malloc(n);

	_track(p);
	return p;
}

void *calloc(size_t n, size_t size)
{
	void *p = _fail(__builtin_return_address(0)) ? NULL :
							 __libc_calloc(n, size);

	_track(p);
	return p;
}

void *realloc(void *p, size_t n)
{
	void *q;

	if (n > 0 && _fail(__builtin_return_address(0)))
		return NULL;
	q = __libc_realloc(p, n);
	if (q != NULL || n == 0) {
		_untrack(p);
		_track(q);
	}
	return q;
}

void free(void *p)
{
	_untrack(p);
	__libc_free(p);
}

static void _watch_start(long fail_at)
{
	Dl_info info;

	if (_base == NULL && dladdr((void *)copus_init, &info))
		_base = info.dli_fbase;
	memset(_live, 0, sizeof(_live));
	_nlive = 0;
	_failed = false;
	_countdown = fail_at;
	_watch = true;
}

static void _watch_stop(void)
{
	_watch = false;
	_countdown = 0;
}

static char _dir[256];

static int _save(void *arg, const char *path, int64_t step)
{
	FILE *f = fopen(path, "w");

	(void)arg;
	if (f == NULL)
		return -1;
	fprintf(f, "%lld\n", (long long)step);
	return fclose(f) == 0 ? 0 : -1;
}

static int _load(void *arg, const char *path, int64_t step)
{
	(void)arg;
	(void)step;
	return access(path, R_OK) == 0 ? 0 : -1;
}

/* No variable of Slurm, PMIx or copus: a job run by hand. */
static void _clear_env(void)
{
	extern char **environ;
	char name[256];
	size_t i = 0, n;

	while (environ[i] != NULL) {
		const char *e = environ[i];

		n = strcspn(e, "=");
		if (n < sizeof(name) &&
		    (!strncmp(e, "SLURM_", 6) || !strncmp(e, "PMIX_", 5) ||
		     !strncmp(e, "COPUS_", 6))) {
			memcpy(name, e, n);
			name[n] = '\0';
			unsetenv(name); /* the later entries move up */
			continue;
		}
		i++;
	}
}

static copus_config _config(void)
{
	copus_config c = COPUS_CONFIG_INITIALIZER;

	c.limits = (copus_batch_limits){ 64, 2048, 4, 128, true };
	c.no_signal_handler = 1;
	c.ckpt_dir = _dir;
	c.save = _save;
	c.load = _load;
	c.fingerprint = "resnet50-oom-test";
	return c;
}

/* A checkpoint at step 2 in _dir, as a job leaves it when requeued. */
static void _checkpoint(void)
{
	copus_config c = _config();
	copus_ctx *ctx = NULL;

	snprintf(_dir, sizeof(_dir), "/tmp/copus-test-oom-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(_dir));
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	for (int s = 0; s < 2; s++) {
		copus_step_begin(ctx);
		ASSERT_STATUS(copus_step_end(ctx, 16, 0), COPUS_OK);
	}
	ASSERT_STATUS(copus_checkpoint(ctx), COPUS_OK);
	copus_finalize(ctx);
}

static void a_resume_that_runs_out_of_memory_leaks_nothing(void)
{
	copus_config c;
	copus_ctx *ctx;
	long n, failed = 0, worked = 0;
	char cmd[300];

	_clear_env();
	_checkpoint();
	/* Once unwatched: what libc allocates once (time zone, stdio). */
	c = _config();
	ctx = NULL;
	ASSERT_STATUS(copus_init(&c, &ctx), COPUS_OK);
	copus_finalize(ctx);
	for (n = 1; n < 100000; n++) {
		int rc;

		c = _config();
		ctx = NULL;
		_watch_start(n);
		rc = copus_init(&c, &ctx);
		if (rc == COPUS_OK)
			copus_finalize(ctx);
		_watch_stop();
		if (rc == COPUS_OK) {
			worked++;
		} else {
			failed++;
			/* The error names what failed. */
			if (!strstr(copus_errmsg(NULL), copus_strerror(rc)) &&
			    rc == COPUS_ENOMEM) {
				fprintf(stderr, "allocation %ld failing: "
						"copus_init says \"%s\"\n",
					n, copus_errmsg(NULL));
				CU_FAIL("an allocation failure not named");
			}
		}
		if (_nlive != 0) {
			fprintf(stderr, "allocation %ld failing: copus_init %s "
					"(%s), %ld block(s) left allocated\n",
				n, rc == COPUS_OK ? "worked" : "failed",
				copus_strerror(rc), _nlive);
			CU_FAIL("blocks left allocated");
		}
		if (!_failed)
			break;
	}
	printf("copus_init resuming: %ld allocation(s), %ld failure(s) "
	       "handled, %ld run(s) that worked around one\n",
	       n - 1, failed, worked - 1);
	CU_ASSERT(failed > 0);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", _dir);
	CU_ASSERT_EQUAL(system(cmd), 0);
}
#endif /* !COPUS_TEST_ASAN */

int main(void)
{
#ifdef COPUS_TEST_ASAN
	puts("SKIP: AddressSanitizer replaces malloc itself");
	return 77;
#else
	static const struct test_case tests[] = {
		TEST(a_resume_that_runs_out_of_memory_leaks_nothing),
	};

	return RUN_TESTS("runtime-oom", tests);
#endif
}

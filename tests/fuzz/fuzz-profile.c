/*
 * Fuzz target: sim_app_load() (sim/trace.c), a model's measured profile as
 * copus-sim reads it from a trace directory: placements.csv,
 * scalability.csv and validation-<batch>.csv, files that come from other
 * people's measurements.
 *
 * The input holds the files of one model directory, each introduced by a
 * line "== NAME" (NAME: 1 to 40 characters of [A-Za-z0-9._-], not starting
 * with a dot) and ending where the next such line starts; text before the
 * first such line is ignored. The target writes them into a directory of
 * its scratch directory, emptied first, and loads the model from it. An
 * accepted profile must give the simulator finite, positive step times and
 * progress that does not go backwards.
 */
#define _GNU_SOURCE /* memmem */
#include <dirent.h>
#include <math.h>

#include "sim.h"

#include "fuzz.h"

#define MODEL "model"
/* Files per input: the three kinds, with several validation batches. */
#define MAX_FILES 8

static int name_ok(const char *s, size_t n)
{
	if (n == 0 || n > 40 || s[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '\0' ||
		    !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789._-", s[i]))
			return 0;
	return 1;
}

/* Empty the model directory of what the previous input wrote. */
static void empty_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	FUZZ_CHECK(d != NULL);
	while ((e = readdir(d)) != NULL) {
		char path[1024];

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		FUZZ_CHECK(unlink(path) == 0);
	}
	closedir(d);
}

/* The start of the next line "== NAME" after p, or NULL. */
static const uint8_t *next_header(const uint8_t *p, const uint8_t *end)
{
	const uint8_t *q = memmem(p, (size_t)(end - p), "\n== ", 4);

	return q != NULL ? q + 1 : NULL;
}

static void write_files(const char *dir, const uint8_t *data, size_t size)
{
	const uint8_t *end = data + size, *h = NULL;
	int files = 0;

	/* A header at the very start has no newline before it. */
	if (size >= 3 && memcmp(data, "== ", 3) == 0)
		h = data;
	else if (size > 0)
		h = next_header(data, end);
	while (h != NULL && files < MAX_FILES) {
		const uint8_t *name = h + 3, *nl, *body, *next;
		size_t nlen;

		nl = memchr(name, '\n', (size_t)(end - name));
		if (nl == NULL)
			break;
		nlen = (size_t)(nl - name);
		body = nl + 1;
		/* From the newline, so that an empty file ends at once. */
		next = next_header(nl, end);
		if (name_ok((const char *)name, nlen)) {
			char path[1024];

			snprintf(path, sizeof(path), "%s/%.*s", dir, (int)nlen,
				 (const char *)name);
			fuzz_write_file(path, body,
					(size_t)((next ? next : end) - body));
			files++;
		}
		h = next;
	}
}

static void check_app(const struct app *a)
{
	static const int shapes[][3] = { { 1 }, { 2 }, { 4 }, { 1, 1 },
					 { 3, 1 }, { 8, 8, 8 } };
	static const double locals[] = { 0.5, 1, 7.5, 64, 1e7 };
	const struct ptable *t = &a->tab[0];
	double prev = 0;

	FUZZ_CHECK(a->nv >= 1 && t->n >= 1 && t->ngrid >= 1);
	for (size_t i = 0; i < a->nv; i++) {
		FUZZ_CHECK(a->v[i].nepochs >= 1);
		FUZZ_CHECK(i == 0 || a->v[i].batch > a->v[i - 1].batch);
	}
	FUZZ_CHECK(a->init_batch == a->v[0].batch);
	FUZZ_CHECK(a->max_batch == a->v[a->nv - 1].batch);
	FUZZ_CHECK(a->min_local >= 1 && a->max_local >= a->min_local);
	FUZZ_CHECK(a->max_epochs >= 1);
	for (size_t i = 0; i < t->n; i++) {
		const struct prow *r = &t->rows[i];

		FUZZ_CHECK(r->nodes == (int)strlen(r->placement));
		FUZZ_CHECK(r->local >= 1 && r->step > 0 && r->sync >= 0 &&
			   r->sync <= r->step);
	}
	for (size_t s = 0; s < sizeof(shapes) / sizeof(*shapes); s++)
		for (size_t k = 0; k < sizeof(locals) / sizeof(*locals); k++) {
			double step = -1, sync = -1;
			int nn = shapes[s][2] ? 3 : shapes[s][1] ? 2 : 1;

			FUZZ_CHECK(sim_app_throughput(a, 0, shapes[s], nn,
						      locals[k], &step,
						      &sync) == COPUS_OK);
			FUZZ_CHECK(isfinite(step) && step > 0);
			FUZZ_CHECK(isfinite(sync) && sync >= 0);
		}
	for (int e = 0; e <= a->max_epochs + 1; e++) {
		double p = sim_app_progress(a, e), sqr, var;

		FUZZ_CHECK(isfinite(p) && p >= prev);
		prev = p;
		sim_app_grad(a, a->init_batch * 1.5, e, &sqr, &var);
		FUZZ_CHECK(isfinite(sqr) && sqr >= 0);
		FUZZ_CHECK(isfinite(var) && var >= 0);
		FUZZ_CHECK(isfinite(sim_app_iteration(a, a->max_batch, e)));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const untyped[1] = { "" };
	static char dir[512];
	char err[SIM_ERR_LEN] = "";
	struct app a;
	int rc;

	if (dir[0] == '\0') {
		snprintf(dir, sizeof(dir), "%s/" MODEL, fuzz_scratch());
		FUZZ_CHECK(mkdir(dir, 0700) == 0);
	}
	empty_dir(dir);
	write_files(dir, data, size);
	rc = sim_app_load(&a, fuzz_scratch(), MODEL, untyped, 1, err,
			  sizeof(err));
	if (rc != COPUS_OK) {
		FUZZ_CHECK(err[0] != '\0');
		return 0;
	}
	check_app(&a);
	sim_app_free(&a);
	return 0;
}

/*
 * Fuzz target: copus_hint_parse(), the job's Comment as slurmctld reads it
 * (any text a job's owner chooses, at most 1024 bytes). An accepted hint
 * must hold only values within the bounds copus/hint.h documents (and a
 * model the planner can build), and must encode and parse back to itself.
 */
#include <math.h>

#include <copus/hint.h>

#include "fuzz.h"

/* Relative closeness of the %.10g the encoder writes. */
static int close_to(double a, double b)
{
	return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b));
}

static int type_ok(const char *s)
{
	size_t n = strnlen(s, COPUS_HINT_TYPE_LEN);

	return n >= 1 && n < COPUS_HINT_TYPE_LEN &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789_.-") == n;
}

static double perf_at(const copus_perf_params *p, int k)
{
	const double v[7] = { p->alpha_c, p->beta_c, p->alpha_n, p->beta_n,
			      p->alpha_r, p->beta_r, p->gamma };

	return v[k];
}

static void check_bounds(const copus_hint *h)
{
	const copus_batch_limits *l = &h->limits;

	FUZZ_CHECK(h->version == COPUS_HINT_VERSION);
	FUZZ_CHECK(h->job_id >= 1);
	FUZZ_CHECK(copus_job_state_name(h->state) != NULL);
	FUZZ_CHECK(h->step >= 0 && h->step <= COPUS_HINT_STEP_MAX);
	FUZZ_CHECK(h->restart_count >= 0 &&
		   h->restart_count <= COPUS_HINT_RESTART_MAX);
	FUZZ_CHECK(h->time >= 0);
	FUZZ_CHECK(l->init_batch >= 1 && l->init_batch <= COPUS_HINT_BATCH_MAX);
	FUZZ_CHECK(l->max_batch >= l->init_batch &&
		   l->max_batch <= COPUS_HINT_BATCH_MAX);
	FUZZ_CHECK(l->min_local >= 1 && l->min_local <= COPUS_HINT_LOCAL_MAX);
	FUZZ_CHECK(l->max_local >= l->min_local &&
		   l->max_local <= COPUS_HINT_LOCAL_MAX);
	FUZZ_CHECK(h->grad.sqr >= 0 && h->grad.sqr <= COPUS_HINT_GRAD_MAX);
	FUZZ_CHECK(h->grad.var >= 0 && h->grad.var <= COPUS_HINT_GRAD_MAX);
	FUZZ_CHECK(h->progress >= 0 && h->progress <= COPUS_HINT_PROGRESS_MAX);
	FUZZ_CHECK(h->target >= 0 && h->target <= COPUS_HINT_PROGRESS_MAX);
	FUZZ_CHECK(h->granularity == 0 ||
		   (h->granularity >= 2 && h->granularity <= COPUS_HINT_GRAN_MAX));
	FUZZ_CHECK(h->n_perf >= 0 && h->n_perf <= COPUS_HINT_MAX_TYPES);
	FUZZ_CHECK(h->clamped >= 0);
	FUZZ_CHECK(h->has_model == 0 || h->has_model == 1);
	if (h->has_model) {
		copus_planner_layer layers[COPUS_PLANNER_MAX_LAYERS];
		int n = 0;

		/* An accepted model is one the planner can plan. */
		FUZZ_CHECK(copus_planner_layers(&h->model, layers,
						COPUS_PLANNER_MAX_LAYERS,
						&n) == COPUS_OK);
		FUZZ_CHECK(n >= 1 && n <= COPUS_PLANNER_MAX_LAYERS);
	}
	for (int i = 0; i < h->n_perf; i++) {
		FUZZ_CHECK(type_ok(h->perf[i].type));
		for (int j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(h->perf[i].type, h->perf[j].type));
		for (int k = 0; k < 7; k++) {
			double x = perf_at(&h->perf[i].perf, k);

			if (k == 6)
				FUZZ_CHECK(x >= COPUS_HINT_GAMMA_MIN &&
					   x <= COPUS_HINT_GAMMA_MAX);
			else
				FUZZ_CHECK(x >= COPUS_HINT_TIME_MIN &&
					   x <= COPUS_HINT_TIME_MAX);
		}
	}
}

/* What the scheduler reads back from what the job wrote. */
static void check_round_trip(const copus_hint *h)
{
	char buf[COPUS_HINT_MAX_LEN + 1], err[256];
	copus_hint back;
	size_t len = 0;
	int rc;

	rc = copus_hint_encode(h, buf, sizeof(buf), &len, err, sizeof(err));
	/* Numbers written with ten digits may outgrow a hint written short. */
	if (rc == COPUS_ERANGE)
		return;
	FUZZ_CHECK(rc == COPUS_OK);
	FUZZ_CHECK(len == strlen(buf) && len <= COPUS_HINT_MAX_LEN);
	rc = copus_hint_parse(buf, &back, err, sizeof(err));
	if (rc != COPUS_OK)
		fprintf(stderr, "encoded: %s\nrejected: %s\n", buf, err);
	FUZZ_CHECK(rc == COPUS_OK);
	/* The values were clamped once; their encoding is within bounds. */
	FUZZ_CHECK(back.clamped == 0);
	FUZZ_CHECK(back.job_id == h->job_id && back.state == h->state);
	FUZZ_CHECK(back.step == h->step && back.time == h->time);
	FUZZ_CHECK(back.restart_count == h->restart_count);
	FUZZ_CHECK(close_to(back.limits.init_batch, h->limits.init_batch));
	FUZZ_CHECK(close_to(back.limits.max_batch, h->limits.max_batch));
	FUZZ_CHECK(back.limits.min_local == h->limits.min_local);
	FUZZ_CHECK(back.limits.max_local == h->limits.max_local);
	FUZZ_CHECK(back.limits.accumulation == h->limits.accumulation);
	FUZZ_CHECK(close_to(back.grad.sqr, h->grad.sqr));
	FUZZ_CHECK(close_to(back.grad.var, h->grad.var));
	FUZZ_CHECK(close_to(back.progress, h->progress));
	FUZZ_CHECK(close_to(back.target, h->target));
	FUZZ_CHECK(back.granularity == h->granularity);
	FUZZ_CHECK(back.n_perf == h->n_perf);
	FUZZ_CHECK(back.has_model == h->has_model);
	FUZZ_CHECK(memcmp(&back.model, &h->model, sizeof(h->model)) == 0);
	for (int i = 0; i < h->n_perf; i++) {
		FUZZ_CHECK(strcmp(back.perf[i].type, h->perf[i].type) == 0);
		for (int k = 0; k < 7; k++)
			FUZZ_CHECK(close_to(perf_at(&back.perf[i].perf, k),
					    perf_at(&h->perf[i].perf, k)));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_text(data, size), err[256];
	copus_hint h;
	int rc;

	err[0] = 'x';
	rc = copus_hint_parse(text, &h, err, sizeof(err));
	FUZZ_CHECK(rc == COPUS_OK || rc == COPUS_EPARSE ||
		   rc == COPUS_EVERSION);
	if (rc == COPUS_OK) {
		check_bounds(&h);
		check_round_trip(&h);
	} else {
		/* A rejection says why, and leaves nothing half-filled. */
		FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0]);
		FUZZ_CHECK(h.job_id == 0 && h.n_perf == 0 && h.version == 0);
	}
	/* The plugin tells hints from a user's own comment by the prefix. */
	FUZZ_CHECK(rc != COPUS_OK || copus_hint_is_hint(text));
	free(text);
	return 0;
}

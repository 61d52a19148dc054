/*
 * Remaining-work prediction: a random forest (XGBoost's gbtree booster with
 * one round of many parallel trees, learning rate 1, features sampled per
 * split, rows optionally subsampled) over the attributes of finished jobs,
 * predicting the logarithm of their total work; its leaves also give each
 * running job a sample of totals like its own, from which its remaining
 * work is read (forest_left).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xgboost/c_api.h>

#include <copus/predict.h>

enum { F_APP, F_USER, F_GPUS, F_BATCH, F_COUNT };

/* A row in one tree's leaf (struct copus_predictor's leaves). */
struct lrow {
	uint32_t leaf, row;
};

/*
 * Distinct feature rows with what the forest says of them: row i's
 * features x[i * F_COUNT..], its leaf in each tree leaf[i * trees..], its
 * log total (NAN: not asked yet); found by their bytes through slot
 * (index + 1, 0: empty; a power of two at least twice n).
 */
struct row_memo {
	float *x, *leaf;
	double *total;
	size_t n, trees;
	size_t gen;
	size_t *slot;
	size_t nslots;
};

struct copus_predictor {
	copus_predictor_params params;
	/* Strings seen in finished jobs; a string's code is its index. */
	char **names;
	size_t nnames, capnames;
	/* Where each name is: open addressing, names' index + 1 (0: empty),
	 * nslots a power of two at least twice nnames. */
	size_t *slot;
	size_t nslots;
	/* Finished jobs, a ring of params.history rows. */
	float *x;
	float *y; /* log(total work) */
	size_t count, next;
	BoosterHandle booster;
	int since_train;
	size_t trainings;
	/* The leaf of every recorded job in every tree of the forest, tree
	 * by tree (trained rows of them each), sorted by leaf (see
	 * forest_left). */
	struct lrow *leaves;
	float *ty; /* the trained rows' log totals (the ring moves on) */
	size_t trees, trained;
	/*
	 * The forest's answers for the distinct feature rows of the last
	 * call of remaining_many, kept for the next: a row's leaves and its
	 * total depend on nothing else while the forest is the same (gen is
	 * trainings when they were computed). Rows that did not come again
	 * are dropped at each call.
	 */
	struct row_memo memo;
};

static int params_check(const copus_predictor_params *p)
{
	if (p->size != sizeof(*p) || p->version != COPUS_PREDICTOR_PARAMS_VERSION)
		return COPUS_EVERSION;
	if (p->trees < 1 || p->trees > 10000 || p->max_depth < 1 ||
	    p->max_depth > 30 || !(p->subsample > 0.0 && p->subsample <= 1.0) ||
	    p->min_samples < 1 || p->retrain_every < 1 || p->history < 2)
		return COPUS_EINVAL;
	return COPUS_OK;
}

/* FNV-1a over n bytes. */
static uint64_t hash_bytes(const void *b, size_t n)
{
	const unsigned char *c = b;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

static void row_memo_free(struct row_memo *m)
{
	free(m->x);
	free(m->leaf);
	free(m->total);
	free(m->slot);
	memset(m, 0, sizeof(*m));
}

/* The index of feature row x in m, or -1. */
static long row_memo_find(const struct row_memo *m, const float *x)
{
	if (m->nslots == 0)
		return -1;
	for (size_t k = hash_bytes(x, F_COUNT * sizeof(float)) &
			(m->nslots - 1);
	     m->slot[k] != 0; k = (k + 1) & (m->nslots - 1)) {
		size_t i = m->slot[k] - 1;
		if (memcmp(&m->x[i * F_COUNT], x, F_COUNT * sizeof(float)) == 0)
			return (long)i;
	}
	return -1;
}

int copus_predictor_create(const copus_predictor_params *params,
			   copus_predictor **out)
{
	static const copus_predictor_params defaults =
		COPUS_PREDICTOR_PARAMS_INITIALIZER;
	copus_predictor *p;
	int rc;

	if (out == NULL)
		return COPUS_EINVAL;
	if (params == NULL)
		params = &defaults;
	if ((rc = params_check(params)) != COPUS_OK)
		return rc;
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		return COPUS_ENOMEM;
	p->params = *params;
	p->x = calloc(params->history * F_COUNT, sizeof(float));
	p->y = calloc(params->history, sizeof(float));
	if (p->x == NULL || p->y == NULL) {
		copus_predictor_destroy(p);
		return COPUS_ENOMEM;
	}
	*out = p;
	return COPUS_OK;
}

void copus_predictor_destroy(copus_predictor *p)
{
	if (p == NULL)
		return;
	if (p->booster != NULL)
		XGBoosterFree(p->booster);
	for (size_t i = 0; i < p->nnames; i++)
		free(p->names[i]);
	free(p->names);
	free(p->slot);
	row_memo_free(&p->memo);
	free(p->x);
	free(p->y);
	free(p->leaves);
	free(p->ty);
	free(p);
}

size_t copus_predictor_count(const copus_predictor *p)
{
	return p == NULL ? 0 : p->count;
}

size_t copus_predictor_trainings(const copus_predictor *p)
{
	return p == NULL ? 0 : p->trainings;
}

/* Enters name i in the index, which has room for it. */
static void name_slot_add(copus_predictor *p, size_t i)
{
	size_t k = hash_bytes(p->names[i], strlen(p->names[i])) &
		   (p->nslots - 1);

	while (p->slot[k] != 0)
		k = (k + 1) & (p->nslots - 1);
	p->slot[k] = i + 1;
}

/* The code of a string, or -1 when unknown and insert is false. */
static long name_code(copus_predictor *p, const char *s, bool insert)
{
	size_t len = strlen(s);

	for (size_t k = p->nslots ? hash_bytes(s, len) & (p->nslots - 1) : 0;
	     p->nslots && p->slot[k] != 0; k = (k + 1) & (p->nslots - 1))
		if (strcmp(p->names[p->slot[k] - 1], s) == 0)
			return (long)(p->slot[k] - 1);
	if (!insert)
		return -1;
	if (2 * (p->nnames + 1) > p->nslots) {
		size_t nslots = p->nslots ? 2 * p->nslots : 128;
		size_t *slot = calloc(nslots, sizeof(*slot));
		if (slot == NULL)
			return -2;
		free(p->slot);
		p->slot = slot;
		p->nslots = nslots;
		for (size_t i = 0; i < p->nnames; i++)
			name_slot_add(p, i);
	}
	if (p->nnames == p->capnames) {
		size_t cap = p->capnames ? 2 * p->capnames : 64;
		char **grown = realloc(p->names, cap * sizeof(*grown));
		if (grown == NULL)
			return -2;
		p->names = grown;
		p->capnames = cap;
	}
	p->names[p->nnames] = strdup(s);
	if (p->names[p->nnames] == NULL)
		return -2;
	name_slot_add(p, p->nnames);
	return (long)p->nnames++;
}

static int attrs_check(const copus_job_attrs *job)
{
	if (job == NULL || job->gpus < 1 || !isfinite(job->batch) ||
	    job->batch < 0.0)
		return COPUS_EINVAL;
	return COPUS_OK;
}

/*
 * The feature row of a job. Strings never seen in a finished job are
 * missing values (NaN), which the trees route by their learned default.
 */
static int features(copus_predictor *p, const copus_job_attrs *job,
		    bool insert, float *row)
{
	const char *s[2] = { job->application, job->user };

	for (int k = 0; k < 2; k++) {
		if (s[k] == NULL) {
			row[k] = NAN;
			continue;
		}
		long code = name_code(p, s[k], insert);
		if (code == -2)
			return COPUS_ENOMEM;
		row[k] = code < 0 ? NAN : (float)code;
	}
	row[F_GPUS] = (float)log2(job->gpus);
	row[F_BATCH] = job->batch > 0.0 ? (float)log2(job->batch) : NAN;
	return COPUS_OK;
}

#define XGB(call)                              \
	do {                                   \
		if ((call) != 0)               \
			goto fail;             \
	} while (0)

/*
 * A forest fitted to n rows x with labels y (log totals), or NULL when
 * XGBoost fails.
 */
static BoosterHandle fit(const copus_predictor *p, const float *x,
			 const float *y, size_t n)
{
	DMatrixHandle dm = NULL;
	BoosterHandle b = NULL;
	char buf[32];
	double mean = 0.0;

	for (size_t i = 0; i < n; i++)
		mean += y[i];
	mean /= (double)n;

	XGB(XGDMatrixCreateFromMat(x, n, F_COUNT, NAN, &dm));
	XGB(XGDMatrixSetFloatInfo(dm, "label", y, n));
	XGB(XGBoosterCreate(&dm, 1, &b));
	XGB(XGBoosterSetParam(b, "verbosity", "0"));
	XGB(XGBoosterSetParam(b, "nthread", "1"));
	XGB(XGBoosterSetParam(b, "booster", "gbtree"));
	XGB(XGBoosterSetParam(b, "objective", "reg:squarederror"));
	XGB(XGBoosterSetParam(b, "eta", "1"));
	XGB(XGBoosterSetParam(b, "lambda", "1e-6"));
	XGB(XGBoosterSetParam(b, "min_child_weight", "1"));
	XGB(XGBoosterSetParam(b, "colsample_bynode", "0.75"));
	snprintf(buf, sizeof(buf), "%.17g", mean);
	XGB(XGBoosterSetParam(b, "base_score", buf));
	snprintf(buf, sizeof(buf), "%d", p->params.trees);
	XGB(XGBoosterSetParam(b, "num_parallel_tree", buf));
	snprintf(buf, sizeof(buf), "%d", p->params.max_depth);
	XGB(XGBoosterSetParam(b, "max_depth", buf));
	snprintf(buf, sizeof(buf), "%g", p->params.subsample);
	XGB(XGBoosterSetParam(b, "subsample", buf));
	snprintf(buf, sizeof(buf), "%u", p->params.seed);
	XGB(XGBoosterSetParam(b, "seed", buf));
	XGB(XGBoosterUpdateOneIter(b, 0, dm));
	XGDMatrixFree(dm);
	return b;
fail:
	if (b != NULL)
		XGBoosterFree(b);
	if (dm != NULL)
		XGDMatrixFree(dm);
	return NULL;
}

/*
 * The forest b's predictions of n rows x into out: log totals, or with
 * leaves the leaf of each row in each of its trees (n x *trees values,
 * row by row).
 */
static int forest_predict(BoosterHandle b, const float *x, size_t n,
			  bool leaves, double *out, size_t *trees)
{
	DMatrixHandle dm = NULL;
	bst_ulong len = 0;
	const float *pred = NULL;
	int rc = COPUS_OK;

	if (XGDMatrixCreateFromMat(x, n, F_COUNT, NAN, &dm) != 0 ||
	    XGBoosterPredict(b, dm, leaves ? 2 : 0, 0, 0, &len, &pred) != 0 ||
	    len == 0 || len % n != 0 || (!leaves && len != n)) {
		rc = COPUS_EFIT;
		goto out;
	}
	for (size_t i = 0; i < len; i++) {
		if (!isfinite(pred[i]) || (leaves && pred[i] < 0.0)) {
			rc = COPUS_EFIT;
			goto out;
		}
		out[i] = pred[i];
	}
	if (trees != NULL)
		*trees = len / n;
out:
	if (dm != NULL)
		XGDMatrixFree(dm);
	return rc;
}

/*
 * The forest b's leaves of n rows x (T trees, as trained): row i's leaf in
 * tree t into leaf[dest[i] * T + t], read straight from XGBoost's answer.
 */
static int forest_leaves(BoosterHandle b, const float *x, size_t n, size_t T,
			 const size_t *dest, float *leaf)
{
	DMatrixHandle dm = NULL;
	bst_ulong len = 0;
	const float *pred = NULL;
	int rc = COPUS_OK;

	if (XGDMatrixCreateFromMat(x, n, F_COUNT, NAN, &dm) != 0 ||
	    XGBoosterPredict(b, dm, 2, 0, 0, &len, &pred) != 0 || len == 0 ||
	    len % n != 0) {
		rc = COPUS_EFIT;
		goto out;
	}
	if (len / n != T) {
		rc = COPUS_EFIT;
		goto out;
	}
	for (size_t i = 0; i < len; i++)
		if (!isfinite(pred[i]) || pred[i] < 0.0) {
			rc = COPUS_EFIT;
			goto out;
		}
	for (size_t i = 0; i < n; i++)
		memcpy(&leaf[dest[i] * T], &pred[i * T], T * sizeof(*leaf));
out:
	if (dm != NULL)
		XGDMatrixFree(dm);
	return rc;
}

static int lrow_cmp(const void *a, const void *b)
{
	const struct lrow *x = a, *y = b;

	if (x->leaf != y->leaf)
		return (x->leaf > y->leaf) - (x->leaf < y->leaf);
	return (x->row > y->row) - (x->row < y->row);
}

/*
 * The leaves of n rows whose leaf in each of the trees trees is in
 * leaf[n x trees], as sorted per-tree lists in out (trees x n).
 */
static void leaves_sort(const double *leaf, size_t n, size_t trees,
			struct lrow *out)
{
	for (size_t t = 0; t < trees; t++) {
		struct lrow *o = &out[t * n];
		for (size_t i = 0; i < n; i++)
			o[i] = (struct lrow){ (uint32_t)leaf[i * trees + t],
					      (uint32_t)i };
		qsort(o, n, sizeof(*o), lrow_cmp);
	}
}

/* Fits the forest to the recorded jobs and records their leaves. */
static int train(copus_predictor *p)
{
	BoosterHandle b = fit(p, p->x, p->y, p->count);
	double *leaf = NULL;
	size_t trees = 0;
	int rc;

	if (b == NULL)
		return COPUS_EFIT;
	if (p->booster != NULL)
		XGBoosterFree(p->booster);
	p->booster = b;
	p->since_train = 0;
	p->trainings++;
	free(p->leaves);
	free(p->ty);
	p->leaves = NULL;
	p->trees = p->trained = 0;
	p->ty = malloc(p->count * sizeof(*p->ty));
	leaf = malloc(p->count * (size_t)p->params.trees * sizeof(*leaf));
	if (leaf == NULL || p->ty == NULL) {
		free(leaf);
		return COPUS_ENOMEM;
	}
	memcpy(p->ty, p->y, p->count * sizeof(*p->ty));
	rc = forest_predict(b, p->x, p->count, true, leaf, &trees);
	if (rc == COPUS_OK && trees > (size_t)p->params.trees)
		rc = COPUS_EFIT;
	if (rc == COPUS_OK &&
	    (p->leaves = malloc(trees * p->count * sizeof(*p->leaves))) ==
		    NULL)
		rc = COPUS_ENOMEM;
	if (rc == COPUS_OK) {
		leaves_sort(leaf, p->count, trees, p->leaves);
		p->trees = trees;
		p->trained = p->count;
	}
	free(leaf);
	return rc;
}

/* Record one finished job (checked by the caller) without training. */
static int record(copus_predictor *p, const copus_job_attrs *job,
		  double total_work)
{
	float row[F_COUNT];
	int rc;

	if ((rc = features(p, job, true, row)) != COPUS_OK)
		return rc;
	memcpy(&p->x[p->next * F_COUNT], row, sizeof(row));
	p->y[p->next] = (float)log(total_work);
	p->next = (p->next + 1) % p->params.history;
	if (p->count < p->params.history)
		p->count++;
	p->since_train++;
	return COPUS_OK;
}

int copus_predictor_add(copus_predictor *p, const copus_job_attrs *job,
			double total_work)
{
	int rc;

	if (p == NULL || !isfinite(total_work) || total_work <= 0.0)
		return COPUS_EINVAL;
	if ((rc = attrs_check(job)) != COPUS_OK)
		return rc;
	if ((rc = record(p, job, total_work)) != COPUS_OK)
		return rc;
	if (p->count >= (size_t)p->params.min_samples &&
	    (p->booster == NULL || p->since_train >= p->params.retrain_every ||
	     4 * (size_t)p->since_train >= p->count))
		return train(p);
	return COPUS_OK;
}

int copus_predictor_add_many(copus_predictor *p, const copus_job_attrs *jobs,
			     const double *total_work, size_t n)
{
	int rc;

	if (p == NULL || (n > 0 && (jobs == NULL || total_work == NULL)))
		return COPUS_EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(total_work[i]) || total_work[i] <= 0.0)
			return COPUS_EINVAL;
		if ((rc = attrs_check(&jobs[i])) != COPUS_OK)
			return rc;
	}
	for (size_t i = 0; i < n; i++)
		if ((rc = record(p, &jobs[i], total_work[i])) != COPUS_OK)
			return rc;
	if (n > 0 && p->count >= (size_t)p->params.min_samples)
		return train(p);
	return COPUS_OK;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x > y) - (x < y);
}

/* The median of the recorded totals, used until the forest is trained. */
static int median_total(const copus_predictor *p, double *out)
{
	float *sorted = malloc(p->count * sizeof(float));

	if (sorted == NULL)
		return COPUS_ENOMEM;
	memcpy(sorted, p->y, p->count * sizeof(float));
	qsort(sorted, p->count, sizeof(float), cmp_float);
	*out = exp(sorted[p->count / 2]);
	free(sorted);
	return COPUS_OK;
}

int copus_predictor_total_many(copus_predictor *p, const copus_job_attrs *jobs,
			       size_t n, double *total_work)
{
	float *rows = NULL;
	int rc = COPUS_OK;

	if (p == NULL || total_work == NULL || (jobs == NULL && n > 0))
		return COPUS_EINVAL;
	for (size_t i = 0; i < n; i++)
		if ((rc = attrs_check(&jobs[i])) != COPUS_OK)
			return rc;
	if (n == 0)
		return COPUS_OK;
	if (p->count == 0)
		return COPUS_ENODATA;
	if (p->booster == NULL) {
		double median;
		if ((rc = median_total(p, &median)) != COPUS_OK)
			return rc;
		for (size_t i = 0; i < n; i++)
			total_work[i] = median;
		return COPUS_OK;
	}

	rows = malloc(n * F_COUNT * sizeof(float));
	if (rows == NULL)
		return COPUS_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if ((rc = features(p, &jobs[i], false, &rows[i * F_COUNT])) !=
		    COPUS_OK)
			goto out;

	rc = forest_predict(p->booster, rows, n, false, total_work, NULL);
	for (size_t i = 0; rc == COPUS_OK && i < n; i++)
		total_work[i] = exp(total_work[i]);
out:
	free(rows);
	return rc;
}

int copus_predictor_total(copus_predictor *p, const copus_job_attrs *job,
			  double *total_work)
{
	if (job == NULL)
		return COPUS_EINVAL;
	return copus_predictor_total_many(p, job, 1, total_work);
}

/* One point of a job's conditional sample: a finished job's total, or a
 * running job's work done (its total is more), with its weight. */
struct wpoint {
	double v; /* log(total), or log(done) */
	double w;
	bool ended;
};

static int wpoint_cmp(const void *a, const void *b)
{
	const struct wpoint *x = a, *y = b;

	if (x->v != y->v)
		return (x->v > y->v) - (x->v < y->v);
	return (int)y->ended - (int)x->ended; /* ends first at a tie */
}

/* A double as an unsigned integer of the same order (0 and -0 alike). */
static uint64_t order_key(double v)
{
	uint64_t b;

	if (v == 0.0)
		v = 0.0;
	memcpy(&b, &v, sizeof(b));
	return b >> 63 ? ~b : b | (1ull << 63);
}

/*
 * Sorts pt[0..m) as qsort with wpoint_cmp would, the points that compare
 * equal in the order they came (a stable merge sort's, which the sums
 * over the sorted points depend on): by radix, ends first then the values
 * byte by byte, each pass stable; tmp holds m points, hist is scratch.
 */
static void wpoints_sort(struct wpoint *pt, struct wpoint *tmp, size_t m,
			 size_t (*hist)[256])
{
	struct wpoint *src = pt, *dst = tmp;
	size_t ends = 0;

	if (m < 32) {
		for (size_t i = 1; i < m; i++) {
			struct wpoint x = pt[i];
			size_t j = i;
			for (; j > 0 && wpoint_cmp(&pt[j - 1], &x) > 0; j--)
				pt[j] = pt[j - 1];
			pt[j] = x;
		}
		return;
	}
	memset(hist, 0, 8 * sizeof(*hist));
	for (size_t i = 0; i < m; i++) {
		if (isnan(pt[i].v)) {
			/* No order key for it: the comparison's order. */
			qsort(pt, m, sizeof(*pt), wpoint_cmp);
			return;
		}
		uint64_t k = order_key(pt[i].v);
		for (int b = 0; b < 8; b++)
			hist[b][(k >> (8 * b)) & 0xff]++;
		ends += pt[i].ended;
	}
	/* The ends first, each part in its order. */
	for (size_t i = 0, e = 0, c = ends; i < m; i++)
		dst[pt[i].ended ? e++ : c++] = pt[i];
	src = tmp;
	dst = pt;
	for (int b = 0; b < 8; b++) {
		size_t at = 0, *h = hist[b];
		if (h[(order_key(src[0].v) >> (8 * b)) & 0xff] == m)
			continue; /* one value of this byte: nothing moves */
		for (int d = 0; d < 256; d++) {
			size_t c = h[d];
			h[d] = at;
			at += c;
		}
		for (size_t i = 0; i < m; i++)
			dst[h[(order_key(src[i].v) >> (8 * b)) & 0xff]++] =
				src[i];
		struct wpoint *x = src;
		src = dst;
		dst = x;
	}
	if (src != pt)
		memcpy(pt, src, m * sizeof(*pt));
}

/*
 * The median total of a job, from the points of its weighted sample above
 * what it has done, pt[0..m) sorted: the weighted Kaplan-Meier estimate of
 * its total given a total above that (which only those points determine),
 * the running jobs censored. Returns the index of the point at the median,
 * or -1 when no finished job's total is among them.
 */
static long km_median(const struct wpoint *pt, size_t m)
{
	double at_risk = 0.0, above = 0.0, cum = 0.0;

	for (size_t i = 0; i < m; i++)
		at_risk += pt[i].w;
	/* The mass of the ends, then the first end past half of it; the
	 * masses are computed twice rather than stored. */
	for (int pass = 0; pass < 2; pass++) {
		double r = at_risk, s = 1.0;
		for (size_t i = 0; i < m; i++) {
			if (pt[i].ended && r > 0.0) {
				double mass = s * pt[i].w / r;
				s -= mass;
				if (pass == 0)
					above += mass;
				else if ((cum += mass) >= 0.5 * above)
					return (long)i;
			}
			r -= pt[i].w;
		}
		if (!(above > 0.0))
			return -1;
	}
	return -1;
}

/*
 * The groups of the distinct rows of p->memo whose leaves are the same in
 * every tree: group[u] for row u, numbered from 0; returns their number,
 * or 0 without memory.
 */
static size_t leaf_groups(const copus_predictor *p, size_t *group)
{
	const struct row_memo *m = &p->memo;
	size_t T = m->trees, nslots = 64, ng = 0;
	size_t *slot, *first;

	while (nslots < 2 * m->n)
		nslots *= 2;
	slot = calloc(nslots, sizeof(*slot));
	first = malloc((m->n + 1) * sizeof(*first));
	if (slot == NULL || first == NULL) {
		free(slot);
		free(first);
		return 0;
	}
	for (size_t u = 0; u < m->n; u++) {
		const float *lu = &m->leaf[u * T];
		size_t k = hash_bytes(lu, T * sizeof(*lu)) & (nslots - 1);
		for (; slot[k] != 0; k = (k + 1) & (nslots - 1))
			if (memcmp(&m->leaf[first[slot[k] - 1] * T], lu,
				   T * sizeof(*lu)) == 0)
				break;
		if (slot[k] == 0) {
			first[ng] = u;
			slot[k] = ++ng;
		}
		group[u] = slot[k] - 1;
	}
	free(slot);
	free(first);
	return ng;
}

/* The first of the m points pt (sorted) above c (m when none is). */
static size_t first_point_above(const struct wpoint *pt, size_t m, double c)
{
	size_t lo = 0, hi = m;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (pt[mid].v > c)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/*
 * The forest's leaves of the n feature rows, row i at rows[i * F_COUNT]:
 * into p->memo, which keeps only these rows' (the distinct ones), those
 * it already had copied, the others predicted; row[i] is row i's index
 * there.
 */
static int rows_leaves(copus_predictor *p, const float *rows, size_t n,
		       size_t *row)
{
	struct row_memo *old = &p->memo, m = { 0 };
	size_t T = p->trees, nmiss = 0, *miss = NULL;
	float *mx = NULL;
	int rc = COPUS_ENOMEM;

	if (old->gen != p->trainings || old->trees != T)
		row_memo_free(old);
	m.trees = T;
	m.gen = p->trainings;
	for (m.nslots = 64; m.nslots < 2 * n; m.nslots *= 2)
		;
	m.x = malloc(n * F_COUNT * sizeof(*m.x));
	m.leaf = malloc(n * T * sizeof(*m.leaf));
	m.total = malloc(n * sizeof(*m.total));
	m.slot = calloc(m.nslots, sizeof(*m.slot));
	miss = malloc(n * sizeof(*miss));
	if (!m.x || !m.leaf || !m.total || !m.slot || !miss)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const float *x = &rows[i * F_COUNT];
		long u = row_memo_find(&m, x), o;
		if (u >= 0) {
			row[i] = (size_t)u;
			continue;
		}
		row[i] = m.n++;
		memcpy(&m.x[row[i] * F_COUNT], x, F_COUNT * sizeof(*x));
		size_t k = hash_bytes(x, F_COUNT * sizeof(*x)) &
			   (m.nslots - 1);
		while (m.slot[k] != 0)
			k = (k + 1) & (m.nslots - 1);
		m.slot[k] = row[i] + 1;
		if ((o = row_memo_find(old, x)) >= 0) {
			memcpy(&m.leaf[row[i] * T], &old->leaf[(size_t)o * T],
			       T * sizeof(*m.leaf));
			m.total[row[i]] = old->total[o];
		} else {
			m.total[row[i]] = NAN;
			miss[nmiss++] = row[i];
		}
	}
	if (nmiss > 0) {
		mx = malloc(nmiss * F_COUNT * sizeof(*mx));
		if (!mx)
			goto out;
		for (size_t i = 0; i < nmiss; i++)
			memcpy(&mx[i * F_COUNT], &m.x[miss[i] * F_COUNT],
			       F_COUNT * sizeof(*mx));
		rc = forest_leaves(p->booster, mx, nmiss, T, miss, m.leaf);
		if (rc != COPUS_OK)
			goto out;
	}
	row_memo_free(old);
	*old = m;
	memset(&m, 0, sizeof(m));
	rc = COPUS_OK;
out:
	row_memo_free(&m);
	free(miss);
	free(mx);
	return rc;
}

/*
 * The log totals of the distinct rows rows[0..n) of p->memo that have
 * none yet, into it.
 */
static int rows_totals(copus_predictor *p, const size_t *rows, size_t n)
{
	struct row_memo *m = &p->memo;
	float *x = malloc((n + 1) * F_COUNT * sizeof(*x));
	double *total = malloc((n + 1) * sizeof(*total));
	size_t *which = malloc((n + 1) * sizeof(*which)), k = 0;
	int rc = COPUS_ENOMEM;

	if (!x || !total || !which)
		goto out;
	for (size_t i = 0; i < n; i++) {
		if (!isnan(m->total[rows[i]]))
			continue;
		/* Asked once, even when several jobs share the row. */
		m->total[rows[i]] = INFINITY;
		memcpy(&x[k * F_COUNT], &m->x[rows[i] * F_COUNT],
		       F_COUNT * sizeof(*x));
		which[k++] = rows[i];
	}
	rc = k > 0 ? forest_predict(p->booster, x, k, false, total, NULL)
		   : COPUS_OK;
	for (size_t i = 0; i < k; i++)
		m->total[which[i]] = rc == COPUS_OK ? total[i] : NAN;
out:
	free(x);
	free(total);
	free(which);
	return rc;
}

/*
 * The remaining work of n running jobs (the distinct rows row[i] of
 * p->memo, work done done), as a quantile regression forest answers
 * (Meinshausen, 2006): the finished jobs that share a leaf with a job in a
 * tree of the forest form its sample, each weighted by 1 / the leaf's size
 * in that tree, summed over trees. The running jobs in the same leaves
 * join the sample as censored points (their total is more than they have
 * done), so that long jobs not finished yet are not forgotten. A job
 * needs the median of its total less done, given a total above done: for
 * jobs that recur exactly, one past its prediction is nearly done; where
 * totals are heavy-tailed, the longer a job has run the longer it will
 * run (least attained service first). A job whose sample holds no total
 * above what it has done is left out (have[i] false): it keeps the rule
 * of remaining_many.
 */
static int forest_left(copus_predictor *p, const size_t *row,
		       const double *done, size_t n, double *remaining,
		       bool *have)
{
	size_t T = p->trees, N = p->trained, kept = 0;
	const float *leaf = p->memo.leaf;
	double *w = calloc(N + n, sizeof(*w));
	uint32_t *touched = malloc((N + n) * sizeof(*touched));
	struct wpoint *pt = malloc((N + n) * sizeof(*pt));
	struct wpoint *tmp = malloc((N + n) * sizeof(*tmp));
	size_t (*hist)[256] = malloc(8 * sizeof(*hist));
	struct lrow *run = malloc(T * n * sizeof(*run));
	size_t *ord = malloc(n * sizeof(*ord)), *at_leaf = NULL, *start = NULL;
	size_t *run_at = NULL, *fin_at = NULL;
	/* log(done) of each job that has done some, once, not per group. */
	double *logd = malloc((n + 1) * sizeof(*logd));
	size_t *group = malloc((p->memo.n + 1) * sizeof(*group));
	int rc = COPUS_ENOMEM;

	if (!w || !touched || !pt || !tmp || !hist || !run || !ord || !group ||
	    !logd)
		goto out;
	for (size_t i = 0; i < n; i++)
		logd[i] = done[i] > 0.0 ? log(done[i]) : -INFINITY;
	/*
	 * The running jobs in each tree's leaves, sorted by leaf and job: by
	 * counting, the jobs taken in order (the leaves are node numbers,
	 * fewer than 2^(max_depth + 1)).
	 */
	uint32_t nleaf = 0;
	for (size_t k = 0; k < p->memo.n * T; k++)
		if ((uint32_t)leaf[k] + 1 > nleaf)
			nleaf = (uint32_t)leaf[k] + 1;
	/* Where each leaf's rows begin in each tree's lists (run_at: the
	 * running jobs', fin_at: the finished jobs'), nleaf + 1 a tree. */
	size_t L = (size_t)nleaf + 1;
	at_leaf = malloc(L * sizeof(*at_leaf));
	run_at = malloc(T * L * sizeof(*run_at));
	fin_at = malloc(T * L * sizeof(*fin_at));
	if (!at_leaf || !run_at || !fin_at)
		goto out;
	for (size_t t = 0; t < T; t++) {
		const struct lrow *f = &p->leaves[t * N];
		size_t k = 0;
		for (uint32_t l = 0; l <= nleaf; l++) {
			while (k < N && f[k].leaf < l)
				k++;
			fin_at[t * L + l] = k;
		}
	}
	for (size_t t = 0; t < T; t++) {
		struct lrow *o = &run[t * n];
		memset(at_leaf, 0, L * sizeof(*at_leaf));
		kept = 0;
		for (size_t i = 0; i < n; i++)
			if (done[i] > 0.0) {
				at_leaf[(uint32_t)leaf[row[i] * T + t] + 1]++;
				kept++;
			}
		for (uint32_t l = 0; l < nleaf; l++)
			at_leaf[l + 1] += at_leaf[l];
		memcpy(&run_at[t * L], at_leaf, L * sizeof(*at_leaf));
		for (size_t i = 0; i < n; i++)
			if (done[i] > 0.0) {
				uint32_t l = (uint32_t)leaf[row[i] * T + t];
				o[at_leaf[l]++] = (struct lrow){ l,
								 (uint32_t)i };
			}
	}
	/*
	 * Jobs in the same leaves of every tree share one sample: ord holds
	 * them group by group (each group's in their order), a group's from
	 * start[g] to start[g + 1]. The groups do not depend on each other.
	 */
	size_t ng = p->memo.n > 0 ? leaf_groups(p, group) : 0;
	if (ng == 0 && n > 0)
		goto out;
	if ((start = calloc(ng + 1, sizeof(*start))) == NULL)
		goto out;
	for (size_t i = 0; i < n; i++)
		start[group[row[i]] + 1]++;
	for (size_t g = 1; g <= ng; g++)
		start[g] += start[g - 1];
	for (size_t i = 0; i < n; i++)
		ord[start[group[row[i]]]++] = i;
	for (size_t g = ng; g > 0; g--)
		start[g] = start[g - 1];
	start[0] = 0;
	for (size_t gi = 0; gi < ng; gi++) {
		size_t g = start[gi], e = start[gi + 1];
		size_t q0 = ord[g], nt = 0, m = 0;
		const float *lq = &leaf[row[q0] * T];
		for (size_t t = 0; t < T; t++) {
			uint32_t l = (uint32_t)lq[t];
			size_t lo, hi, rlo, rhi;
			lo = fin_at[t * L + l];
			hi = fin_at[t * L + l + 1];
			rlo = run_at[t * L + l];
			rhi = run_at[t * L + l + 1];
			double size = (double)(hi - lo + rhi - rlo);
			if (size == 0.0)
				continue;
			for (size_t k = lo; k < hi; k++) {
				uint32_t r = p->leaves[t * N + k].row;
				if (w[r] == 0.0)
					touched[nt++] = r;
				w[r] += 1.0 / size;
			}
			for (size_t k = rlo; k < rhi; k++) {
				uint32_t r = (uint32_t)N + run[t * n + k].row;
				if (w[r] == 0.0)
					touched[nt++] = r;
				w[r] += 1.0 / size;
			}
		}
		for (size_t k = 0; k < nt; k++) {
			uint32_t r = touched[k];
			pt[m++] = r < N ? (struct wpoint){ p->ty[r], w[r], true }
					: (struct wpoint){ logd[r - N], w[r],
							   false };
			w[r] = 0.0;
		}
		wpoints_sort(pt, tmp, m, hist);
		/* The median depends only on the first point above what a
		 * job has done: jobs that share it share the estimate. */
		size_t last_a = SIZE_MAX;
		long at = -1;
		for (size_t i = g; i < e; i++) {
			size_t q = ord[i], a;
			double c = done[q] > 0.0 ? logd[q] : -INFINITY;
			a = first_point_above(pt, m, c);
			if (a != last_a) {
				at = km_median(pt + a, m - a);
				last_a = a;
			}
			if (at >= 0) {
				remaining[q] = fmax(exp(pt[a + (size_t)at].v) -
							    done[q],
						    0.0);
				have[q] = true;
			}
		}
	}
	rc = COPUS_OK;
out:
	free(w);
	free(touched);
	free(pt);
	free(tmp);
	free(hist);
	free(run);
	free(ord);
	free(at_leaf);
	free(run_at);
	free(fin_at);
	free(logd);
	free(start);
	free(group);
	return rc;
}

int copus_predictor_remaining(copus_predictor *p, const copus_job_attrs *job,
			      double done, double target, double *remaining)
{
	if (remaining == NULL || !isfinite(done) || done < 0.0 ||
	    !isfinite(target) || target < 0.0)
		return COPUS_EINVAL;
	if (target > 0.0) {
		*remaining = target > done ? target - done : 0.0;
		return COPUS_OK;
	}
	if (job == NULL)
		return COPUS_EINVAL;
	return copus_predictor_remaining_many(p, job, &done, 1, remaining);
}

int copus_predictor_remaining_many(copus_predictor *p,
				   const copus_job_attrs *jobs,
				   const double *done, size_t n,
				   double *remaining)
{
	float *rows = NULL;
	int rc;

	if (remaining == NULL || (done == NULL && n > 0))
		return COPUS_EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!isfinite(done[i]) || done[i] < 0.0)
			return COPUS_EINVAL;
	/*
	 * Without the forest's leaves, the totals go into remaining, then
	 * become what is left (more than done, else as much again).
	 */
	if (p == NULL || p->booster == NULL || p->leaves == NULL || n == 0) {
		if ((rc = copus_predictor_total_many(p, jobs, n, remaining)) !=
		    COPUS_OK)
			return rc;
		for (size_t i = 0; i < n; i++)
			remaining[i] = remaining[i] > done[i] ?
					       remaining[i] - done[i] : done[i];
		return COPUS_OK;
	}
	if (jobs == NULL)
		return COPUS_EINVAL;
	for (size_t i = 0; i < n; i++)
		if ((rc = attrs_check(&jobs[i])) != COPUS_OK)
			return rc;
	/* With them, the sample's median; the rule only where it has
	 * none, so only those jobs' totals are asked for. */
	size_t *row = malloc(n * sizeof(*row)), nleft = 0;
	bool *have = calloc(n, sizeof(*have));
	if ((rows = malloc(n * F_COUNT * sizeof(*rows))) == NULL || !row ||
	    !have) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n && rc == COPUS_OK; i++)
		rc = features(p, &jobs[i], false, &rows[i * F_COUNT]);
	if (rc == COPUS_OK)
		rc = rows_leaves(p, rows, n, row);
	if (rc == COPUS_OK)
		rc = forest_left(p, row, done, n, remaining, have);
	for (size_t i = 0; rc == COPUS_OK && i < n; i++)
		if (!have[i])
			row[nleft++] = row[i];
	if (rc == COPUS_OK && nleft > 0)
		rc = rows_totals(p, row, nleft);
	for (size_t i = 0, k = 0; rc == COPUS_OK && i < n; i++) {
		if (have[i])
			continue;
		double total = exp(p->memo.total[row[k++]]);
		remaining[i] = total > done[i] ? total - done[i] : done[i];
	}
out:
	free(rows);
	free(row);
	free(have);
	return rc;
}

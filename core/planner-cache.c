/*
 * The planner's memoisation: an open-addressing table of answers of
 * copus_planner_best(), keyed by the caller's small integers. An answer
 * the caller's key does not find is looked for, before it is computed, by
 * what it is computed from (the model's layers, the batch, the GPU's
 * constants, the options and the cell: copus_planner_best() is a pure
 * function of them), so that jobs of one model under different keys share
 * their plans (the first round after a start asks for every job's).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <copus/planner.h>

/* ----------------------------------------------------------------- cache */

struct cache_entry {
	copus_planner_key key;
	int used;
	int status;
	copus_planner_plan plan;
};

/* A model whose answers the cache holds, its layers copied. */
struct seen_model {
	uint64_t hash;
	copus_planner_layer *layers;
	int n_layers, dtype_bytes, kind;
};

/*
 * An answer by what it was computed from: the stored answer of slots[at -
 * 1] (0: empty); model and gpu index the models and GPUs seen.
 */
struct content_entry {
	uint64_t hash;
	size_t at;
	int32_t model, gpu, batch, nodes, gpus_per_node;
	copus_planner_options opt;
};

/*
 * The most layers and GPU types the cache copies to find answers by
 * content; past them, new answers are found by key only.
 */
#define SEEN_LAYERS_MAX 65536
#define SEEN_GPUS_MAX 64

struct copus_planner_cache {
	struct cache_entry *slots;
	size_t mask;     /* slots - 1, a power of two minus one */
	size_t capacity; /* answers stored at most */
	size_t count;
	/* The stored answers by content, mask + 1 slots. */
	struct content_entry *content;
	struct seen_model *models;
	size_t nmodels, capmodels, nlayers;
	copus_planner_gpu *gpus;
	size_t ngpus;
};

static size_t key_hash(const copus_planner_key *k)
{
	uint64_t h = 1469598103934665603ull;
	const int32_t v[5] = { k->model, k->batch, k->gpu, k->nodes,
			       k->gpus_per_node };

	for (int i = 0; i < 5; i++) {
		h ^= (uint32_t)v[i];
		h *= 1099511628211ull;
		h ^= h >> 29;
	}
	return (size_t)h;
}

static bool key_equal(const copus_planner_key *a, const copus_planner_key *b)
{
	return a->model == b->model && a->batch == b->batch &&
	       a->gpu == b->gpu && a->nodes == b->nodes &&
	       a->gpus_per_node == b->gpus_per_node;
}

int copus_planner_cache_new(size_t capacity, copus_planner_cache **out)
{
	copus_planner_cache *c;
	size_t slots = 16;

	if (out == NULL || capacity < 1 || capacity > ((size_t)1 << 28))
		return COPUS_EINVAL;
	while (slots < 2 * capacity)
		slots *= 2;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return COPUS_ENOMEM;
	c->slots = calloc(slots, sizeof(*c->slots));
	c->content = calloc(slots, sizeof(*c->content));
	c->gpus = malloc(SEEN_GPUS_MAX * sizeof(*c->gpus));
	if (c->slots == NULL || c->content == NULL || c->gpus == NULL) {
		free(c->slots);
		free(c->content);
		free(c->gpus);
		free(c);
		return COPUS_ENOMEM;
	}
	c->mask = slots - 1;
	c->capacity = capacity;
	*out = c;
	return COPUS_OK;
}

/* Forgets the models and GPUs seen. */
static void seen_clear(copus_planner_cache *c)
{
	for (size_t i = 0; i < c->nmodels; i++)
		free(c->models[i].layers);
	c->nmodels = 0;
	c->nlayers = 0;
	c->ngpus = 0;
}

void copus_planner_cache_free(copus_planner_cache *c)
{
	if (c == NULL)
		return;
	seen_clear(c);
	free(c->models);
	free(c->gpus);
	free(c->content);
	free(c->slots);
	free(c);
}

void copus_planner_cache_clear(copus_planner_cache *c)
{
	if (c == NULL)
		return;
	memset(c->slots, 0, (c->mask + 1) * sizeof(*c->slots));
	memset(c->content, 0, (c->mask + 1) * sizeof(*c->content));
	seen_clear(c);
	c->count = 0;
}

/* The slot of key, or the empty slot where it would go. */
static struct cache_entry *slot_of(const copus_planner_cache *c,
				   const copus_planner_key *key)
{
	size_t i = key_hash(key) & c->mask;

	while (c->slots[i].used && !key_equal(&c->slots[i].key, key))
		i = (i + 1) & c->mask;
	return &c->slots[i];
}

int copus_planner_cache_find(const copus_planner_cache *c,
			     const copus_planner_key *key,
			     const copus_planner_plan **plan)
{
	const struct cache_entry *e;

	if (c == NULL || key == NULL || plan == NULL)
		return COPUS_EINVAL;
	e = slot_of(c, key);
	if (!e->used)
		return COPUS_ENODATA;
	*plan = &e->plan;
	return e->status;
}

/* FNV-1a over n bytes, from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 1099511628211ull;
	return h;
}

/* The bytes of a layer's fields (its doubles, then tensor_divides): two
 * layers are the same input when these are. */
#define LAYER_DOUBLES offsetof(copus_planner_layer, tensor_divides)

static bool layers_same(const copus_planner_layer *a,
			const copus_planner_layer *b, int n)
{
	for (int i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], LAYER_DOUBLES) != 0 ||
		    a[i].tensor_divides != b[i].tensor_divides)
			return false;
	return true;
}

static uint64_t model_hash(const copus_planner_model *m)
{
	uint64_t h = 1469598103934665603ull;
	const int32_t v[3] = { m->n_layers, m->dtype_bytes, m->kind };

	h = fnv(h, v, sizeof(v));
	for (int i = 0; i < m->n_layers; i++) {
		h = fnv(h, &m->layers[i], LAYER_DOUBLES);
		h = fnv(h, &m->layers[i].tensor_divides, sizeof(int));
	}
	return h;
}

/*
 * The index of model m (of hash h) among those seen, entered when new;
 * -1 when it is not and cannot be (no memory, or the copies are at their
 * bound).
 */
static long model_index(copus_planner_cache *c, const copus_planner_model *m,
			uint64_t h)
{
	struct seen_model *s;

	for (size_t i = 0; i < c->nmodels; i++) {
		s = &c->models[i];
		if (s->hash == h && s->n_layers == m->n_layers &&
		    s->dtype_bytes == m->dtype_bytes && s->kind == m->kind &&
		    layers_same(s->layers, m->layers, m->n_layers))
			return (long)i;
	}
	if (m->n_layers < 0 || (m->n_layers > 0 && m->layers == NULL) ||
	    c->nlayers + (size_t)m->n_layers > SEEN_LAYERS_MAX)
		return -1;
	if (c->nmodels == c->capmodels) {
		size_t cap = c->capmodels ? 2 * c->capmodels : 16;
		s = realloc(c->models, cap * sizeof(*s));
		if (s == NULL)
			return -1;
		c->models = s;
		c->capmodels = cap;
	}
	s = &c->models[c->nmodels];
	s->layers = malloc(((size_t)m->n_layers + 1) * sizeof(*s->layers));
	if (s->layers == NULL)
		return -1;
	if (m->n_layers > 0)
		memcpy(s->layers, m->layers,
		       (size_t)m->n_layers * sizeof(*s->layers));
	s->hash = h;
	s->n_layers = m->n_layers;
	s->dtype_bytes = m->dtype_bytes;
	s->kind = m->kind;
	c->nlayers += (size_t)m->n_layers;
	return (long)c->nmodels++;
}

/* The index of GPU g among those seen, entered when new; -1 when it is
 * not and cannot be. copus_planner_gpu holds doubles only. */
static long gpu_index(copus_planner_cache *c, const copus_planner_gpu *g)
{
	for (size_t i = 0; i < c->ngpus; i++)
		if (memcmp(&c->gpus[i], g, sizeof(*g)) == 0)
			return (long)i;
	if (c->ngpus == SEEN_GPUS_MAX)
		return -1;
	c->gpus[c->ngpus] = *g;
	return (long)c->ngpus++;
}

/*
 * The slot of the entry of content q (hash q->hash), or the empty one
 * where it would go.
 */
static struct content_entry *content_of(const copus_planner_cache *c,
					const struct content_entry *q)
{
	size_t i = q->hash & c->mask;

	for (; c->content[i].at != 0; i = (i + 1) & c->mask) {
		const struct content_entry *e = &c->content[i];
		if (e->hash == q->hash && e->model == q->model &&
		    e->gpu == q->gpu && e->batch == q->batch &&
		    e->nodes == q->nodes &&
		    e->gpus_per_node == q->gpus_per_node &&
		    e->opt.max_micro_batches == q->opt.max_micro_batches &&
		    memcmp(&e->opt.memory_fraction, &q->opt.memory_fraction,
			   sizeof(double)) == 0)
			return &c->content[i];
	}
	return &c->content[i];
}

/*
 * The content of the answer for key (m, gpu, opt) into *q; false when it
 * cannot be found by content (the cache's copies are at their bound).
 */
static bool content_key(copus_planner_cache *c, const copus_planner_key *key,
			const copus_planner_model *m,
			const copus_planner_gpu *gpu,
			const copus_planner_options *opt,
			struct content_entry *q)
{
	static const copus_planner_options def =
		COPUS_PLANNER_OPTIONS_INITIALIZER;
	uint64_t h = model_hash(m);
	long mi = model_index(c, m, h), gi = gpu_index(c, gpu);

	if (mi < 0 || gi < 0)
		return false;
	memset(q, 0, sizeof(*q));
	q->model = (int32_t)mi;
	q->gpu = (int32_t)gi;
	q->batch = key->batch;
	q->nodes = key->nodes;
	q->gpus_per_node = key->gpus_per_node;
	/* The planner reads no options as the defaults. */
	q->opt.max_micro_batches = (opt ? opt : &def)->max_micro_batches;
	q->opt.memory_fraction = (opt ? opt : &def)->memory_fraction;
	const int32_t v[5] = { q->model, q->gpu, q->batch, q->nodes,
			       q->gpus_per_node };
	h = fnv(h, v, sizeof(v));
	h = fnv(h, &q->opt.max_micro_batches, sizeof(int));
	q->hash = fnv(h, &q->opt.memory_fraction, sizeof(double));
	return true;
}

int copus_planner_best_cached(copus_planner_cache *c,
			      const copus_planner_key *key,
			      const copus_planner_model *m,
			      const copus_planner_gpu *gpu,
			      const copus_planner_options *opt,
			      const copus_planner_plan **plan)
{
	struct cache_entry *e;
	copus_planner_cell cell;
	int rc;

	if (c == NULL || key == NULL || plan == NULL)
		return COPUS_EINVAL;
	e = slot_of(c, key);
	if (e->used) {
		*plan = &e->plan;
		return e->status;
	}
	cell.nodes = key->nodes;
	cell.gpus_per_node = key->gpus_per_node;
	/* The same model, batch, GPU, options and cell under another key:
	 * the same answer. */
	struct content_entry q, *ce = NULL;
	if (m != NULL && gpu != NULL && key->nodes >= 1 &&
	    key->gpus_per_node >= 1 && content_key(c, key, m, gpu, opt, &q)) {
		ce = content_of(c, &q);
		if (ce->at != 0) {
			const struct cache_entry *d = &c->slots[ce->at - 1];
			e->plan = d->plan;
			*plan = &e->plan;
			if (c->count >= c->capacity)
				return d->status;
			e->key = *key;
			e->status = d->status;
			e->used = 1;
			c->count++;
			return e->status;
		}
	}
	if (c->count >= c->capacity) {
		/* Full: the answer goes into the empty slot, which stays
		 * unused, so it lasts until the next call. */
		rc = copus_planner_best(m, key->batch, gpu, &cell, opt,
					&e->plan);
		*plan = &e->plan;
		return rc;
	}
	rc = copus_planner_best(m, key->batch, gpu, &cell, opt, &e->plan);
	if (rc != COPUS_OK && rc != COPUS_ERANGE)
		return rc;
	e->key = *key;
	e->status = rc;
	e->used = 1;
	c->count++;
	if (ce != NULL) {
		q.at = (size_t)(e - c->slots) + 1;
		*ce = q;
	}
	*plan = &e->plan;
	return rc;
}

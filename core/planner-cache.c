/*
 * The planner's memoisation: an open-addressing table of answers of
 * copus_planner_best(), keyed by the caller's small integers.
 */
#include <stdbool.h>
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

struct copus_planner_cache {
	struct cache_entry *slots;
	size_t mask;     /* slots - 1, a power of two minus one */
	size_t capacity; /* answers stored at most */
	size_t count;
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
	if (c->slots == NULL) {
		free(c);
		return COPUS_ENOMEM;
	}
	c->mask = slots - 1;
	c->capacity = capacity;
	*out = c;
	return COPUS_OK;
}

void copus_planner_cache_free(copus_planner_cache *c)
{
	if (c == NULL)
		return;
	free(c->slots);
	free(c);
}

void copus_planner_cache_clear(copus_planner_cache *c)
{
	if (c == NULL)
		return;
	memset(c->slots, 0, (c->mask + 1) * sizeof(*c->slots));
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
	*plan = &e->plan;
	return rc;
}

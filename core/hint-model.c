/*
 * The hint's optional "mdl" member, the model descriptor a job sends so
 * that the planner can choose its degrees (copus/hint.h): its architectures
 * and fields, its check, its text and its parsing. core/hint.c calls it.
 * Pure: no I/O.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include <copus/hint.h>

#include "internal.h"

/* The architectures of "mdl.a", indexed by copus_planner_arch. */
static const char *const arch_names[] = {
	[COPUS_ARCH_TRANSFORMER] = "tf",
	[COPUS_ARCH_MOE] = "moe",
	[COPUS_ARCH_WIDE_RESNET] = "wrn",
};

#define ARCH_BIT(a) (1u << (a))
#define ARCH_TF ARCH_BIT(COPUS_ARCH_TRANSFORMER)
#define ARCH_MOE ARCH_BIT(COPUS_ARCH_MOE)
#define ARCH_WRN ARCH_BIT(COPUS_ARCH_WIDE_RESNET)
#define ARCH_ALL (ARCH_TF | ARCH_MOE | ARCH_WRN)

/*
 * The integer members of "mdl": the architectures that have them, where
 * they go in copus_planner_desc and their bounds. One table for the
 * encoder's check, the encoder and the parser, so the three cannot drift.
 */
static const struct model_field {
	const char *key;
	unsigned archs;
	size_t offset;
	int lo, hi;
} model_fields[] = {
	{ "dt", ARCH_ALL, offsetof(copus_planner_desc, dtype_bytes), 2, 4 },
	{ "l", ARCH_TF | ARCH_MOE, offsetof(copus_planner_desc, layers), 1,
	  COPUS_PLANNER_MAX_LAYERS - 2 },
	{ "h", ARCH_TF | ARCH_MOE, offsetof(copus_planner_desc, hidden), 1,
	  COPUS_HINT_MODEL_MAX },
	{ "n", ARCH_TF | ARCH_MOE, offsetof(copus_planner_desc, heads), 1,
	  COPUS_HINT_MODEL_MAX },
	{ "s", ARCH_TF | ARCH_MOE, offsetof(copus_planner_desc, seq_len), 1,
	  COPUS_HINT_MODEL_MAX },
	{ "v", ARCH_TF | ARCH_MOE, offsetof(copus_planner_desc, vocab), 1,
	  COPUS_HINT_VOCAB_MAX },
	{ "e", ARCH_MOE, offsetof(copus_planner_desc, experts), 1,
	  COPUS_HINT_MODEL_MAX },
	{ "g", ARCH_MOE, offsetof(copus_planner_desc, expert_group), 1,
	  COPUS_HINT_MODEL_MAX },
	{ "d", ARCH_WRN, offsetof(copus_planner_desc, depth), 50, 101 },
	{ "w", ARCH_WRN, offsetof(copus_planner_desc, width_factor), 1,
	  COPUS_HINT_MODEL_MAX },
	{ "c", ARCH_WRN, offsetof(copus_planner_desc, channels), 1,
	  COPUS_HINT_MODEL_MAX },
	{ "k", ARCH_WRN, offsetof(copus_planner_desc, classes), 1,
	  COPUS_HINT_VOCAB_MAX },
	{ "i", ARCH_WRN, offsetof(copus_planner_desc, image_size), 32,
	  COPUS_HINT_MODEL_MAX },
};

#define N_MODEL_FIELDS (sizeof(model_fields) / sizeof(*model_fields))

static int *_field_of(copus_planner_desc *d, const struct model_field *f)
{
	return (int *)((char *)d + f->offset);
}

static int _field_get(const copus_planner_desc *d, const struct model_field *f)
{
	return *(const int *)((const char *)d + f->offset);
}

/* The architecture's name, or NULL. */
static const char *_arch_name(int a)
{
	if (a < 0 || (size_t)a >= sizeof(arch_names) / sizeof(*arch_names))
		return NULL;
	return arch_names[a];
}

/*
 * Whether a model descriptor is one that "mdl" may carry: every member of
 * its architecture within its bounds, the values the planner knows, and a
 * model copus_planner_layers() builds. Members of other architectures are
 * not looked at.
 */
int copus__hint_model_check(const copus_planner_desc *d, char *err,
			    size_t errlen)
{
	copus_planner_layer layers[COPUS_PLANNER_MAX_LAYERS];
	const char *arch = _arch_name((int)d->arch);
	int n;

	if (arch == NULL) {
		copus__err_set(err, errlen, "hint field \"mdl.a\": unknown architecture %d",
		     (int)d->arch);
		return COPUS_EINVAL;
	}
	for (size_t i = 0; i < N_MODEL_FIELDS; i++) {
		const struct model_field *f = &model_fields[i];
		int x = _field_get(d, f);

		if (!(f->archs & ARCH_BIT(d->arch)))
			continue;
		if (x < f->lo || x > f->hi) {
			copus__err_set(err, errlen,
			     "hint field \"mdl.%s\": %d outside [%d, %d]",
			     f->key, x, f->lo, f->hi);
			return COPUS_EINVAL;
		}
	}
	if (d->dtype_bytes != 2 && d->dtype_bytes != 4) {
		copus__err_set(err, errlen, "hint field \"mdl.dt\": %d is not 2 or 4",
		     d->dtype_bytes);
		return COPUS_EINVAL;
	}
	if (d->arch == COPUS_ARCH_WIDE_RESNET && d->depth != 50 &&
	    d->depth != 101) {
		copus__err_set(err, errlen, "hint field \"mdl.d\": %d is not 50 or 101",
		     d->depth);
		return COPUS_EINVAL;
	}
	if (copus_planner_layers(d, layers, COPUS_PLANNER_MAX_LAYERS, &n) !=
	    COPUS_OK) {
		copus__err_set(err, errlen,
		     "hint field \"mdl\": the planner builds no %s model from it",
		     arch);
		return COPUS_EINVAL;
	}
	return COPUS_OK;
}

/* Append "mdl" to the encoder's text (see copus__hint_put). */
bool copus__hint_model_encode(const copus_planner_desc *d, char *buf,
			      size_t size, size_t *pos)
{
	bool ok;

	ok = copus__hint_put(buf, size, pos, ",\"mdl\":{\"a\":\"%s\"",
			     _arch_name((int)d->arch));
	for (size_t i = 0; ok && i < N_MODEL_FIELDS; i++)
		if (model_fields[i].archs & ARCH_BIT(d->arch))
			ok = copus__hint_put(buf, size, pos, ",\"%s\":%d",
					     model_fields[i].key,
					     _field_get(d, &model_fields[i]));
	if (ok)
		ok = copus__hint_put(buf, size, pos, "}");
	return ok;
}

int copus__hint_model_parse(struct copus__hint_parse *p,
			    struct json_object *mdl, copus_hint *out)
{
	copus_planner_desc *d = &out->model;
	struct json_object *a = NULL;
	const char *arch;
	char name[16];
	int rc;

	if (!json_object_is_type(mdl, json_type_object)) {
		copus__err_set(p->err, p->errlen, "hint field \"mdl\": %.40s is not an object",
		     json_object_to_json_string(mdl));
		return COPUS_EPARSE;
	}
	if (!json_object_object_get_ex(mdl, "a", &a) || a == NULL) {
		copus__err_set(p->err, p->errlen, "hint field \"mdl.a\" is missing");
		return COPUS_EPARSE;
	}
	if (!json_object_is_type(a, json_type_string)) {
		copus__err_set(p->err, p->errlen, "hint field \"mdl.a\": %.40s is not a string",
		     json_object_to_json_string(a));
		return COPUS_EPARSE;
	}
	arch = json_object_get_string(a);
	for (int k = 0; k < (int)(sizeof(arch_names) / sizeof(*arch_names)); k++)
		if (arch_names[k] != NULL && strcmp(arch, arch_names[k]) == 0)
			d->arch = (copus_planner_arch)k;
	if (d->arch == 0) {
		copus__err_set(p->err, p->errlen,
		     "hint field \"mdl.a\": unknown architecture %.40s",
		     json_object_to_json_string(a));
		return COPUS_EPARSE;
	}
	/* No member of another architecture, nor an unknown one. */
	json_object_object_foreach(mdl, key, val) {
		const struct model_field *f = NULL;

		(void)val;
		if (strcmp(key, "a") == 0)
			continue;
		for (size_t i = 0; i < N_MODEL_FIELDS; i++)
			if (strcmp(key, model_fields[i].key) == 0)
				f = &model_fields[i];
		if (f == NULL) {
			copus__err_set(p->err, p->errlen,
			     "hint field \"mdl.%.32s\" is unknown", key);
			return COPUS_EPARSE;
		}
		if (!(f->archs & ARCH_BIT(d->arch))) {
			copus__err_set(p->err, p->errlen,
			     "hint field \"mdl.%s\" is not a member of "
			     "architecture \"%s\"", key, arch);
			return COPUS_EPARSE;
		}
	}
	for (size_t i = 0; i < N_MODEL_FIELDS; i++) {
		const struct model_field *f = &model_fields[i];
		struct json_object *v = NULL;
		int64_t x;

		if (!(f->archs & ARCH_BIT(d->arch)))
			continue;
		snprintf(name, sizeof(name), "mdl.%s", f->key);
		if (!json_object_object_get_ex(mdl, f->key, &v) || v == NULL) {
			copus__err_set(p->err, p->errlen, "hint field \"%s\" is missing",
			     name);
			return COPUS_EPARSE;
		}
		rc = copus__hint_integer(p, v, name, f->lo, f->hi, &x);
		if (rc != COPUS_OK)
			return rc;
		*_field_of(d, f) = (int)x;
	}
	if (copus__hint_model_check(d, p->err, p->errlen) != COPUS_OK)
		return COPUS_EPARSE;
	out->has_model = 1;
	return COPUS_OK;
}

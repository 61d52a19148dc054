/*
 * job_submit/copus's checks (see submit.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "submit.h"

/*
 * The GPU entry of a TRES request ("gres:gpu:a100:4,gres:mps:10", also
 * "gres/gpu:a100=4" and "gpu:4"): its type ("" when untyped) and count
 * (1 when not given). Returns 0 when there is a GPU entry, -1 otherwise.
 */
static int _gpu_entry(const char *tres, char *type, size_t tlen, long *count)
{
	const char *s = tres;

	while (s && *s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		char item[128], *p, *q;

		if (len < sizeof(item)) {
			memcpy(item, s, len);
			item[len] = '\0';
			p = item;
			if (!strncmp(p, "gres:", 5) || !strncmp(p, "gres/", 5))
				p += 5;
			if (!strncmp(p, "gpu", 3) &&
			    (p[3] == '\0' || p[3] == ':' || p[3] == '=')) {
				p += 3;
				type[0] = '\0';
				*count = 1;
				if (*p == ':' || *p == '=') {
					char *num;

					p++;
					q = strpbrk(p, ":=");
					num = q ? q + 1 : p;
					if (q) {
						*q = '\0';
						snprintf(type, tlen, "%s", p);
					}
					if (*num >= '0' && *num <= '9')
						*count = strtol(num, NULL, 10);
					else if (!q)
						snprintf(type, tlen, "%s", p);
				}
				return 0;
			}
		}
		s = end ? end + 1 : NULL;
	}
	return -1;
}

/* Whether the cluster has GPUs of the type (or nothing is known). */
static int _type_known(const struct copus__submit *sub, const char *type)
{
	int i;

	if (!type[0] || sub->ntypes <= 0)
		return 1;
	for (i = 0; i < sub->ntypes; i++)
		if (!strcmp(sub->cluster_types[i], type))
			return 1;
	return 0;
}

/* "a100, v100" */
static void _type_list(const struct copus__submit *sub, char *buf, size_t len)
{
	int i;

	buf[0] = '\0';
	for (i = 0; i < sub->ntypes; i++)
		snprintf(buf + strlen(buf), len - strlen(buf), "%s%s",
			 i ? ", " : "", sub->cluster_types[i]);
}

int copus__submit_check(const struct copus__submit *sub, char *why,
			size_t len)
{
	const char *req[4] = { sub->tres_per_node, sub->tres_per_job,
			       sub->tres_per_task, sub->tres_per_socket };
	static const char *const opt[4] = { "--gres", "--gpus",
					    "--gpus-per-task",
					    "--gpus-per-socket" };
	char type[64], have[256], err[160];
	int i, min = 0, max = 0, any = -1, mult = 1;
	long count = 0;

	if (sub->het) {
		snprintf(why, len, "copus: heterogeneous jobs are not "
			 "supported by sched/copus");
		return -1;
	}
	_type_list(sub, have, sizeof(have));
	for (i = 0; i < 4; i++) {
		long n;

		if (_gpu_entry(req[i], type, sizeof(type), &n))
			continue;
		if (!_type_known(sub, type)) {
			snprintf(why, len, "copus: %s asks for GPUs of type "
				 "'%s', which no node has (the cluster has %s)",
				 opt[i], type, have[0] ? have : "no GPUs");
			return -1;
		}
		if (any < 0) {
			any = i;
			count = n;
		}
	}
	if (sub->types) {
		char list[COPUS__TYPES_MAX * (COPUS__TYPE_LEN + 1) + 1];
		char *t, *save = NULL;
		int known = 0;

		snprintf(list, sizeof(list), "%s", sub->types);
		for (t = strtok_r(list, ",", &save); t;
		     t = strtok_r(NULL, ",", &save))
			known += _type_known(sub, t);
		if (!known) {
			snprintf(why, len, "copus: --gpu-types=%s names no "
				 "GPU type that a node has (the cluster has "
				 "%s)", sub->types, have[0] ? have : "no GPUs");
			return -1;
		}
	}
	if (sub->multiple && copus__parse_multiple(sub->multiple, &mult, err,
						   sizeof(err))) {
		snprintf(why, len, "copus: --gpu-multiple=%s: %s",
			 sub->multiple, err);
		return -1;
	}
	if (mult > 1 && any >= 0 && any <= 1) {
		long total = count * (any == 0 && sub->min_nodes > 1 ?
				      sub->min_nodes : 1);

		if (total % mult) {
			snprintf(why, len, "copus: %s asks for %ld GPU(s), "
				 "not a multiple of --gpu-multiple=%d",
				 opt[any], total, mult);
			return -1;
		}
	}
	if (!sub->elastic)
		return 0;
	if (copus__parse_elastic(sub->elastic, &min, &max, err,
				 sizeof(err))) {
		snprintf(why, len, "copus: --elastic=%s: %s", sub->elastic,
			 err);
		return -1;
	}
	if (mult > 1 && max / mult * mult < min) {
		snprintf(why, len, "copus: --elastic=%s holds no multiple of "
			 "--gpu-multiple=%d", sub->elastic, mult);
		return -1;
	}
	if (any < 0) {
		snprintf(why, len, "copus: --elastic=%s needs a GPU request, "
			 "such as --gres=gpu:%d (its starting size)",
			 sub->elastic, min);
		return -1;
	}
	if (any == 0 || any == 1) {
		long total = count * (any == 0 && sub->min_nodes > 1 ?
				      sub->min_nodes : 1);

		if (total < min || total > max) {
			snprintf(why, len, "copus: %s asks for %ld GPU(s)%s, "
				 "outside --elastic=%s", opt[any], total,
				 any == 0 && sub->min_nodes > 1 ?
				 " in all" : "", sub->elastic);
			return -1;
		}
	}
	return 0;
}

/*
 * copus-sim's inputs: the cluster of --cluster ("16x4", "aws:6x4,rtx:3x8")
 * and a Pollux workload CSV (sim/sim.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine-job.h"

int sim_cluster_parse(const char *spec, struct sim_cluster *out, char *err,
		      size_t len)
{
	char *copy = NULL, *save = NULL, *tok;
	int rc = COPUS_EINVAL;

	memset(out, 0, sizeof(*out));
	if (spec == NULL || *spec == '\0') {
		snprintf(err, len, "--cluster: empty specification");
		return COPUS_EINVAL;
	}
	copy = strdup(spec);
	if (copy == NULL)
		return COPUS_ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(tok, ':'), *shape = tok, *end;
		long nodes, gpus;
		copus_node *nn;
		int t;

		if (out->ntypes >= SIM_MAX_TYPES) {
			snprintf(err, len, "--cluster: more than %d GPU types",
				 SIM_MAX_TYPES);
			goto out;
		}
		t = out->ntypes;
		if (colon) {
			*colon = '\0';
			shape = colon + 1;
			if (*tok == '\0' || strlen(tok) >= 32 ||
			    strspn(tok,
				   "abcdefghijklmnopqrstuvwxyz"
				   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") !=
				    strlen(tok)) {
				snprintf(err, len,
					 "--cluster: bad GPU type name '%s'",
					 tok);
				goto out;
			}
			snprintf(out->type_names[t], 32, "%s", tok);
		} else if (strchr(spec, ':') || out->ntypes > 0) {
			snprintf(err, len,
				 "--cluster: '%s': give every part a type "
				 "(type:NODESxGPUS) or use one NODESxGPUS",
				 tok);
			goto out;
		}
		for (int u = 0; u < t; u++)
			if (strcmp(out->type_names[u], out->type_names[t]) ==
			    0) {
				snprintf(err, len,
					 "--cluster: GPU type '%s' twice",
					 out->type_names[t]);
				goto out;
			}
		nodes = strtol(shape, &end, 10);
		if (end == shape || (*end != 'x' && *end != 'X')) {
			snprintf(err, len, "--cluster: '%s' is not NODESxGPUS",
				 shape);
			goto out;
		}
		shape = end + 1;
		gpus = strtol(shape, &end, 10);
		if (end == shape || *end != '\0' || nodes < 1 ||
		    nodes > 100000 || gpus < 1 || gpus > 9) {
			snprintf(err, len,
				 "--cluster: '%s': 1..100000 nodes of 1..9 GPUs "
				 "expected",
				 tok);
			goto out;
		}
		nn = realloc(out->nodes,
			     (size_t)(out->nnodes + nodes) * sizeof(*nn));
		if (nn == NULL) {
			rc = COPUS_ENOMEM;
			goto out;
		}
		out->nodes = nn;
		for (long k = 0; k < nodes; k++) {
			out->nodes[out->nnodes].gpu_type = t;
			out->nodes[out->nnodes].gpus = (int)gpus;
			out->nodes[out->nnodes].usable = true;
			out->nnodes++;
		}
		out->ntypes++;
	}
	rc = out->ntypes > 0 ? COPUS_OK : COPUS_EINVAL;
	if (rc)
		snprintf(err, len, "--cluster: empty specification");
out:
	free(copy);
	if (rc)
		sim_cluster_free(out);
	return rc;
}

void sim_cluster_free(struct sim_cluster *c)
{
	if (c == NULL)
		return;
	free(c->nodes);
	free(c->gpus);
	memset(c, 0, sizeof(*c));
}

/* Whether s holds a control character (a tab, a carriage return, ...). */
static bool has_control(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < ' ' || *s == 0x7f)
			return true;
	return false;
}

int sim_workload_read(const char *path, struct sim_jobspec **out, size_t *n,
		      char *err, size_t len)
{
	struct csv c;
	int cn, ct, ca, cr, cb, rc;
	struct sim_jobspec *js = NULL;

	*out = NULL;
	*n = 0;
	if ((rc = sim_csv_read(path, &c, err, len)) != COPUS_OK)
		return rc;
	rc = COPUS_EPARSE;
	if ((cn = sim_csv_col(&c, "name", err, len)) < 0 ||
	    (ct = sim_csv_col(&c, "time", err, len)) < 0 ||
	    (ca = sim_csv_col(&c, "application", err, len)) < 0 ||
	    (cr = sim_csv_col(&c, "num_replicas", err, len)) < 0 ||
	    (cb = sim_csv_col(&c, "batch_size", err, len)) < 0)
		goto out;
	js = calloc(c.nrows + 1, sizeof(*js));
	if (js == NULL) {
		rc = COPUS_ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c.nrows; i++) {
		struct sim_jobspec *j = &js[i];
		double r;

		/*
		 * A name travels tab-separated from a simulation process to
		 * copus-sim's (main.c): a tab or another control character
		 * in it would cut the line and mislabel the results.
		 */
		if (strlen(c.rows[i][cn]) == 0 ||
		    strlen(c.rows[i][cn]) >= sizeof(j->name) ||
		    strpbrk(c.rows[i][cn], "\"\\") != NULL ||
		    has_control(c.rows[i][cn])) {
			snprintf(err, len,
				 "%s:%ld: column %d (name): '%s' is empty, too "
				 "long or has quotes or control characters",
				 path, c.lines[i], cn + 1, c.rows[i][cn]);
			goto out;
		}
		snprintf(j->name, sizeof(j->name), "%s", c.rows[i][cn]);
		if (strlen(c.rows[i][ca]) == 0 ||
		    strlen(c.rows[i][ca]) >= sizeof(j->app_name) ||
		    strpbrk(c.rows[i][ca], "/.") != NULL) {
			snprintf(err, len,
				 "%s:%ld: column %d (application): '%s' is "
				 "not a model name",
				 path, c.lines[i], ca + 1, c.rows[i][ca]);
			goto out;
		}
		snprintf(j->app_name, sizeof(j->app_name), "%s", c.rows[i][ca]);
		j->app = -1;
		if (sim_csv_double(&c, i, ct, &j->submit, err, len) ||
		    sim_csv_double(&c, i, cr, &r, err, len) ||
		    sim_csv_double(&c, i, cb, &j->batch, err, len))
			goto out;
		if (j->submit < 0 || j->submit > SIM_MAX_TIME) {
			snprintf(err, len,
				 "%s:%ld: column %d (time): '%s' is out of "
				 "range",
				 path, c.lines[i], ct + 1, c.rows[i][ct]);
			goto out;
		}
		if (r < 1 || r > 4096 || r != floor(r)) {
			snprintf(err, len,
				 "%s:%ld: column %d (num_replicas): '%s' is "
				 "not an integer in 1..4096",
				 path, c.lines[i], cr + 1, c.rows[i][cr]);
			goto out;
		}
		j->replicas = (int)r;
		if (j->batch < 1 || j->batch > 1e8) {
			snprintf(err, len,
				 "%s:%ld: column %d (batch_size): '%s' is out "
				 "of range",
				 path, c.lines[i], cb + 1, c.rows[i][cb]);
			goto out;
		}
	}
	*out = js;
	*n = c.nrows;
	js = NULL;
	rc = COPUS_OK;
out:
	free(js);
	sim_csv_free(&c);
	return rc;
}

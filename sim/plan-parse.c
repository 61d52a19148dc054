/*
 * What copus-plan's readers share (sim/plan-read.h): the fields of a
 * CSV file, a whole JSON file, and the names of models, GPU types and
 * cells.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "../runtime/file.h"
#include "plan-read.h"

/* ---------------------------------------------------------------- helpers */

int copus__plan_field_int(const struct csv *c, size_t row, int col, int *out,
			  char *err, size_t errlen)
{
	const char *s = c->rows[row][col];
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno || v < 1 || v > 1000000000) {
		snprintf(err, errlen,
			 "%s:%ld: field '%s': '%s' is not a positive integer",
			 c->path, c->lines[row], c->header[col], s);
		return COPUS_EPARSE;
	}
	*out = (int)v;
	return COPUS_OK;
}

int copus__plan_col_of(const struct csv *c, const char *name, int *col,
		       char *err, size_t errlen)
{
	*col = sim_csv_col(c, name, err, errlen);
	return *col < 0 ? COPUS_EPARSE : COPUS_OK;
}

int plan_model_find(const struct plan_data *d, const char *name)
{
	char buf[PLAN_NAME_LEN];
	const char *dd = strstr(name, "__");

	/* Arena's trace writes "<family>__<size>". */
	if (dd != NULL && strlen(name) < sizeof(buf)) {
		size_t k = (size_t)(dd - name);
		memcpy(buf, name, k);
		snprintf(buf + k, sizeof(buf) - k, "_%s", dd + 2);
		name = buf;
	}
	for (int i = 0; i < d->n_models; i++)
		if (strcmp(d->models[i].name, name) == 0)
			return i;
	return -1;
}

int copus__plan_gpu_find(const struct plan_data *d, const char *type)
{
	for (int i = 0; i < d->n_gpus; i++)
		if (strcmp(d->gpus[i].type, type) == 0)
			return i;
	return -1;
}

int plan_cell_parse(const struct plan_data *d, const char *name, int *gpu,
		    copus_planner_cell *cell, char *err, size_t errlen)
{
	char type[16], canon[PLAN_NAME_LEN];
	int nodes, nodes2, gpn, used = 0, g;

	/* Only the canonical spelling (no sign, space or leading zero), so
	 * that one cell has one name in every file that names it. */
	if (strlen(name) >= PLAN_NAME_LEN ||
	    sscanf(name, "%d_%15[a-z0-9]_%d_n_%d_d%n", &nodes, type, &nodes2,
		   &gpn, &used) != 4 ||
	    used != (int)strlen(name) || nodes < 1 || gpn < 1 ||
	    nodes != nodes2 || nodes > 4096 || gpn > 4096 ||
	    snprintf(canon, sizeof(canon), "%d_%s_%d_n_%d_d", nodes, type,
		     nodes, gpn) >= (int)sizeof(canon) ||
	    strcmp(canon, name) != 0) {
		snprintf(err, errlen,
			 "cell '%s' is not <nodes>_<type>_<nodes>_n_<gpus per "
			 "node>_d (e.g. 2_a40_2_n_2_d)",
			 name);
		return COPUS_EPARSE;
	}
	g = copus__plan_gpu_find(d, type);
	if (g < 0) {
		snprintf(err, errlen,
			 "cell '%s': GPU type '%s' is not in devices.json",
			 name, type);
		return COPUS_EINVAL;
	}
	*gpu = g;
	cell->nodes = nodes;
	cell->gpus_per_node = gpn;
	return COPUS_OK;
}

int copus__plan_read_json(const char *path, struct json_object **out, char *err,
			  size_t errlen)
{
	struct json_tokener *tok;
	enum json_tokener_error e;
	size_t n, end, line = 1;
	char *text;
	int rc;

	*out = NULL;
	if ((rc = copus__file_read(path, &text, &n, err, errlen)) != COPUS_OK)
		return rc;
	if (n == 0) {
		snprintf(err, errlen, "%s: empty, not JSON", path);
		free(text);
		return COPUS_EPARSE;
	}
	if (!(tok = json_tokener_new())) {
		free(text);
		return COPUS_ENOMEM;
	}
	*out = json_tokener_parse_ex(tok, text, (int)n);
	e = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	/* Only white space may follow the value. */
	while (*out && end < n && strchr(" \t\r\n", text[end]))
		end++;
	if (!*out || end < n) {
		/* A file's last newline ends its last line: the end of the
		 * file is on that line. */
		for (size_t i = 0; i < end && i + 1 < n; i++)
			line += text[i] == '\n';
		snprintf(err, errlen, "%s:%zu: not JSON: %s", path, line,
			 !*out ? (e == json_tokener_continue
					  ? "unexpected end of file"
					  : json_tokener_error_desc(e))
			       : "text after the value");
		json_object_put(*out);
		*out = NULL;
		rc = COPUS_EPARSE;
	}
	json_tokener_free(tok);
	free(text);
	return rc;
}

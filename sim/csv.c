/* A strict reader of the plain comma-separated files of the traces. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static void csv_init(struct csv *c, const char *path)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->path, sizeof(c->path), "%s", path);
}

void sim_csv_free(struct csv *c)
{
	if (c == NULL)
		return;
	if (c->header) {
		for (int i = 0; i < c->ncols; i++)
			free(c->header[i]);
		free(c->header);
	}
	for (size_t r = 0; r < c->nrows; r++) {
		for (int i = 0; i < c->ncols; i++)
			free(c->rows[r][i]);
		free(c->rows[r]);
	}
	free(c->rows);
	free(c->lines);
	memset(c, 0, sizeof(*c));
}

/* Split a line at commas; returns the number of fields or -1 on ENOMEM. */
static int split(char *line, char ***fields)
{
	int n = 1, i = 0;
	char **f;

	for (char *p = line; *p; p++)
		n += *p == ',';
	f = calloc((size_t)n, sizeof(*f));
	if (f == NULL)
		return -1;
	for (char *p = line;; i++) {
		char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		/* Fields are taken as written, without surrounding spaces. */
		while (l > 0 && (p[l - 1] == ' ' || p[l - 1] == '\t'))
			l--;
		while (l > 0 && (*p == ' ' || *p == '\t')) {
			p++;
			l--;
		}
		f[i] = strndup(p, l);
		if (f[i] == NULL) {
			for (int k = 0; k < i; k++)
				free(f[k]);
			free(f);
			return -1;
		}
		if (e == NULL)
			break;
		p = e + 1;
	}
	*fields = f;
	return n;
}

int sim_csv_read(const char *path, struct csv *out, char *err, size_t errlen)
{
	FILE *f = NULL;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	long lineno = 0;
	int rc = COPUS_OK;

	csv_init(out, path);
	f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "%s: cannot open: %s", path,
			 strerror(errno));
		return COPUS_EIO;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		char **fields;
		int n;

		lineno++;
		while (len > 0 &&
		       (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (len == 0)
			continue;
		if (memchr(line, '\0', (size_t)len) != NULL) {
			snprintf(err, errlen, "%s:%ld: a NUL byte in the line",
				 path, lineno);
			rc = COPUS_EPARSE;
			goto out;
		}
		n = split(line, &fields);
		if (n < 0) {
			rc = COPUS_ENOMEM;
			snprintf(err, errlen, "%s: out of memory", path);
			goto out;
		}
		if (out->header == NULL) {
			out->header = fields;
			out->ncols = n;
			continue;
		}
		if (n != out->ncols) {
			for (int i = 0; i < n; i++)
				free(fields[i]);
			free(fields);
			snprintf(err, errlen,
				 "%s:%ld: %d fields, the header has %d", path,
				 lineno, n, out->ncols);
			rc = COPUS_EPARSE;
			goto out;
		}
		if ((out->nrows & (out->nrows + 1)) == 0) {
			size_t nc = 2 * (out->nrows + 1);
			char ***nr = realloc(out->rows, nc * sizeof(*nr));
			long *nl = realloc(out->lines, nc * sizeof(*nl));

			if (nr)
				out->rows = nr;
			if (nl)
				out->lines = nl;
			if (!nr || !nl) {
				for (int i = 0; i < n; i++)
					free(fields[i]);
				free(fields);
				rc = COPUS_ENOMEM;
				snprintf(err, errlen, "%s: out of memory",
					 path);
				goto out;
			}
		}
		out->rows[out->nrows] = fields;
		out->lines[out->nrows] = lineno;
		out->nrows++;
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		rc = COPUS_EIO;
		goto out;
	}
	if (out->header == NULL) {
		snprintf(err, errlen, "%s: empty file (no header)", path);
		rc = COPUS_EPARSE;
	}
out:
	free(line);
	fclose(f);
	if (rc != COPUS_OK)
		sim_csv_free(out);
	return rc;
}

int sim_csv_col(const struct csv *c, const char *name, char *err, size_t errlen)
{
	for (int i = 0; i < c->ncols; i++)
		if (strcmp(c->header[i], name) == 0)
			return i;
	snprintf(err, errlen, "%s:1: no column '%s' in the header", c->path,
		 name);
	return -1;
}

int sim_csv_double(const struct csv *c, size_t row, int col, double *out,
		   char *err, size_t errlen)
{
	const char *s = c->rows[row][col];
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (*s == '\0' || *end != '\0' || errno == ERANGE || !isfinite(v)) {
		snprintf(err, errlen,
			 "%s:%ld: column %d (%s): '%s' is not a finite number",
			 c->path, c->lines[row], col + 1, c->header[col], s);
		return COPUS_EPARSE;
	}
	*out = v;
	return COPUS_OK;
}

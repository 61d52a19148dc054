/*
 * copusctl: what sched/copus decided, for admins.
 *
 *   copusctl status [--state-dir DIR]
 *
 * prints StateSaveLocation/copus_status (written by the plugin every round)
 * as a table: per job its cell (GPU type, GPUs, nodes), goodput speedup,
 * predicted remaining time and the policy's last decision. Without
 * --state-dir it asks slurmctld for StateSaveLocation through the public
 * libslurm API (slurm_load_ctl_conf).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#define MAX_COLS 16
#define MAX_LINE 4096

static void usage(FILE *f)
{
	fprintf(f, "usage: copusctl status [--state-dir DIR]\n"
		   "  Prints what sched/copus decided in its last round\n"
		   "  (StateSaveLocation/copus_status) as a table.\n");
}

/* One table row: its fields point into its own copy of the line. */
struct row {
	char *text;
	char *col[MAX_COLS];
	int n;
};

static int split(char *line, char **col)
{
	int n = 0;
	char *p = line, *tab;

	while (n < MAX_COLS) {
		col[n++] = p;
		tab = strchr(p, '\t');
		if (!tab)
			break;
		*tab = '\0';
		p = tab + 1;
	}
	return strchr(p, '\t') ? -1 : n;
}

static int print_status(const char *path)
{
	char line[MAX_LINE], summary[MAX_LINE] = "";
	struct row *rows = NULL;
	size_t nrows = 0, cap = 0, i;
	int width[MAX_COLS] = { 0 }, ncols = 0, lineno = 0, rc = 1, k;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "copusctl: cannot open %s: %s%s\n", path,
			strerror(errno), errno == ENOENT ?
			" (is SchedulerType=sched/copus running?)" : "");
		return 1;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		struct row *r;

		lineno++;
		if (len && line[len - 1] == '\n')
			line[--len] = '\0';
		else if (!feof(f)) {
			fprintf(stderr, "copusctl: %s:%d: line longer than %d "
				"bytes\n", path, lineno, MAX_LINE - 1);
			goto out;
		}
		if (line[0] == '#') {
			snprintf(summary, sizeof(summary), "%s", line + 1);
			continue;
		}
		if (!len)
			continue;
		if (nrows == cap) {
			struct row *nr;

			cap = cap ? 2 * cap : 64;
			nr = realloc(rows, cap * sizeof(*rows));
			if (!nr) {
				fprintf(stderr, "copusctl: out of memory\n");
				goto out;
			}
			rows = nr;
		}
		r = &rows[nrows];
		r->text = strdup(line);
		if (!r->text) {
			fprintf(stderr, "copusctl: out of memory\n");
			goto out;
		}
		nrows++;
		r->n = split(r->text, r->col);
		if (r->n < 0 || (ncols && r->n != ncols)) {
			fprintf(stderr, "copusctl: %s:%d: expected %d "
				"tab-separated fields, found %s; is this a "
				"copus_status file?\n", path, lineno,
				ncols ? ncols : MAX_COLS,
				r->n < 0 ? "more" : "another number");
			goto out;
		}
		ncols = r->n;
		for (k = 0; k < r->n; k++)
			if ((int)strlen(r->col[k]) > width[k])
				width[k] = (int)strlen(r->col[k]);
	}
	if (ferror(f)) {
		fprintf(stderr, "copusctl: %s: read error\n", path);
		goto out;
	}
	if (summary[0])
		printf("%s\n", summary[0] == ' ' ? summary + 1 : summary);
	for (i = 0; i < nrows; i++) {
		for (k = 0; k + 1 < rows[i].n; k++)
			printf("%-*s  ", width[k], rows[i].col[k]);
		printf("%s\n", rows[i].col[k]);
	}
	rc = 0;
out:
	for (i = 0; i < nrows; i++)
		free(rows[i].text);
	free(rows);
	fclose(f);
	return rc;
}

int main(int argc, char **argv)
{
	const char *dir = NULL;
	slurm_conf_t *conf = NULL;
	char *path;
	int i, rc;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "status")) {
		fprintf(stderr, "copusctl: unknown command '%s'\n", argv[1]);
		usage(stderr);
		return 2;
	}
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--state-dir") && i + 1 < argc) {
			dir = argv[++i];
		} else if (!strncmp(argv[i], "--state-dir=", 12)) {
			dir = argv[i] + 12;
		} else {
			fprintf(stderr, "copusctl: unknown option '%s'\n",
				argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (!dir) {
		if (slurm_load_ctl_conf((time_t)0, &conf) != SLURM_SUCCESS) {
			fprintf(stderr, "copusctl: cannot ask slurmctld for "
				"StateSaveLocation (%s); give --state-dir\n",
				slurm_strerror(slurm_get_errno()));
			return 1;
		}
		dir = conf->state_save_location;
		if (!dir) {
			fprintf(stderr, "copusctl: slurmctld has no "
				"StateSaveLocation; give --state-dir\n");
			slurm_free_ctl_conf(conf);
			return 1;
		}
	}
	path = malloc(strlen(dir) + sizeof("/copus_status"));
	if (!path) {
		fprintf(stderr, "copusctl: out of memory\n");
		return 1;
	}
	sprintf(path, "%s/copus_status", dir);
	rc = print_status(path);
	free(path);
	if (conf)
		slurm_free_ctl_conf(conf);
	return rc;
}

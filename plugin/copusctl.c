/*
 * copusctl: what sched/copus decided, for admins.
 *
 *   copusctl status [--json] [--state-dir DIR]
 *   copusctl job ID [--state-dir DIR]
 *   copusctl stats [--state-dir DIR]
 *   copusctl --version
 *
 * status prints StateSaveLocation/copus_status (written by the plugin every
 * round) as a table, or as JSON: per job its cell (GPU type, GPUs, nodes),
 * goodput speedup, predicted remaining time, the plan of a job with a model
 * on that cell (PLAN, "dp2.tp1.pp2.mb4") with its predicted seconds per
 * iteration (ITER_S), the policy's last decision or the reason it waits,
 * its user's fair-share factor (FAIRSHARE), its last rescale requests
 * (RESCALES) and its hint's verdict. job prints one job's line of it, field
 * by field.
 * stats prints the plugin's counters (StateSaveLocation/copus_stats, see
 * plugin/stats.h). Without --state-dir it asks slurmctld for
 * StateSaveLocation with "scontrol show config", which every Slurm version
 * answers alike (a program on libslurm's public API must load Slurm's auth,
 * hash and credential plugins from 23.02 on, and those need symbols that
 * only Slurm's own commands export).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <slurm/slurm_version.h>

#include "copus_config.h"

#define MAX_COLS 16
#define MAX_LINE 4096

enum format { TABLE, JSON, ONE_JOB };

static void usage(FILE *f)
{
	fprintf(f, "usage: copusctl status [--json] [--state-dir DIR]\n"
		   "       copusctl job ID [--state-dir DIR]\n"
		   "       copusctl stats [--state-dir DIR]\n"
		   "       copusctl --version\n"
		   "  status: what sched/copus decided in its last round\n"
		   "    (StateSaveLocation/copus_status), as a table or JSON.\n"
		   "  job: one job's line of it, field by field.\n"
		   "  stats: the plugin's counters since slurmctld loaded it\n"
		   "    (StateSaveLocation/copus_stats).\n");
}

/* One table row: its fields point into its own copy of the line. */
struct row {
	char *text;
	char *col[MAX_COLS];
	int n;
};

/* Says why one of the plugin's files cannot be read; returns 1. */
static int cannot_open(const char *path)
{
	fprintf(stderr, "copusctl: cannot open %s: %s%s\n", path,
		strerror(errno), errno == ENOENT ?
		" (is SchedulerType=sched/copus running?)" : "");
	return 1;
}

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

/* The header's names as JSON keys: "JOBID" -> "jobid". */
static void json_key(const char *name, char *out, size_t len)
{
	size_t i;

	for (i = 0; name[i] && i + 1 < len; i++)
		out[i] = (name[i] >= 'A' && name[i] <= 'Z') ?
			 (char)(name[i] - 'A' + 'a') : name[i];
	out[i] = '\0';
}

/* The rows (rows[0] the header) as JSON on stdout. */
static int print_json(const char *summary, struct row *rows, size_t nrows)
{
	json_object *top = json_object_new_object();
	json_object *jobs = json_object_new_array();
	char key[32];
	size_t i;
	int k;

	json_object_object_add(top, "round", json_object_new_string(summary));
	for (i = 1; i < nrows; i++) {
		json_object *o = json_object_new_object();

		for (k = 0; k < rows[i].n; k++) {
			json_key(rows[0].col[k], key, sizeof(key));
			json_object_object_add(
				o, key, json_object_new_string(rows[i].col[k]));
		}
		json_object_array_add(jobs, o);
	}
	json_object_object_add(top, "jobs", jobs);
	printf("%s\n", json_object_to_json_string_ext(
				top, JSON_C_TO_STRING_PRETTY |
				JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(top);
	return 0;
}

/* The line of job id, field by field; 1 when it is not there. */
static int print_job(const char *id, struct row *rows, size_t nrows)
{
	size_t i;
	int k;

	for (i = 1; i < nrows; i++) {
		if (strcmp(rows[i].col[0], id))
			continue;
		for (k = 0; k < rows[i].n; k++)
			printf("%-10s %s\n", rows[0].col[k], rows[i].col[k]);
		return 0;
	}
	fprintf(stderr, "copusctl: job %s is not in sched/copus's last round "
		"(it is not pending, or not running with GPUs)\n", id);
	return 1;
}

static int print_status(const char *path, enum format fmt, const char *id)
{
	char line[MAX_LINE], summary[MAX_LINE] = "";
	struct row *rows = NULL;
	size_t nrows = 0, cap = 0, i;
	int width[MAX_COLS] = { 0 }, ncols = 0, lineno = 0, rc = 1, k;
	FILE *f = fopen(path, "r");

	if (!f)
		return cannot_open(path);
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
	if (nrows == 0) {
		fprintf(stderr, "copusctl: %s: no header line; is this a "
			"copus_status file?\n", path);
		goto out;
	}
	if (fmt == JSON) {
		rc = print_json(summary[0] == ' ' ? summary + 1 : summary,
				rows, nrows);
		goto out;
	}
	if (fmt == ONE_JOB) {
		rc = print_job(id, rows, nrows);
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

/* The counters file, aligned: name, value, meaning. */
static int print_stats(const char *path)
{
	char line[MAX_LINE], *col[MAX_COLS];
	int lineno = 0, n;
	FILE *f = fopen(path, "r");

	if (!f)
		return cannot_open(path);
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		line[strcspn(line, "\n")] = '\0';
		if (line[0] == '#' || !line[0])
			continue;
		n = split(line, col);
		if (n != 3) {
			fprintf(stderr, "copusctl: %s:%d: expected name, value "
				"and meaning; is this a copus_stats file?\n",
				path, lineno);
			fclose(f);
			return 1;
		}
		printf("%-30s %12s  %s\n", col[0], col[1], col[2]);
	}
	fclose(f);
	return 0;
}

/*
 * StateSaveLocation as slurmctld has it ("scontrol show config"), or NULL
 * after saying why.
 */
static char *state_save_location(void)
{
	static const char key[] = "StateSaveLocation";
	char line[MAX_LINE], *dir = NULL;
	FILE *p;
	int rc;

	p = popen("scontrol show config 2>&1", "r");
	if (!p) {
		fprintf(stderr, "copusctl: cannot run scontrol: %s; give "
			"--state-dir\n", strerror(errno));
		return NULL;
	}
	while (fgets(line, sizeof(line), p)) {
		char *v = line + sizeof(key) - 1, *end;

		if (dir || strncmp(line, key, sizeof(key) - 1) ||
		    (*v != ' ' && *v != '='))
			continue;
		v += strspn(v, " =");
		end = v + strcspn(v, "\r\n");
		while (end > v && end[-1] == ' ')
			end--;
		*end = '\0';
		if (*v && strcmp(v, "(null)"))
			dir = strdup(v);
	}
	rc = pclose(p);
	if (!dir)
		fprintf(stderr, "copusctl: 'scontrol show config' %s no "
			"StateSaveLocation (exit status %d); give --state-dir\n",
			rc ? "failed and gave" : "gave", rc);
	return dir;
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *cmd, *id = NULL, *file = "copus_status";
	enum format fmt = TABLE;
	char *path, *conf_dir = NULL;
	int i, rc;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("copusctl (%s) %s, built for Slurm %d.%02d.%d\n",
		       PACKAGE_NAME, PACKAGE_VERSION,
		       SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER),
		       SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER),
		       SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
		return 0;
	}
	cmd = argv[1];
	i = 2;
	if (!strcmp(cmd, "stats")) {
		file = "copus_stats";
	} else if (!strcmp(cmd, "job")) {
		if (argc < 3 || argv[2][0] < '0' || argv[2][0] > '9' ||
		    argv[2][strspn(argv[2], "0123456789")]) {
			fprintf(stderr, "copusctl: job needs a job id (a "
				"number)\n");
			usage(stderr);
			return 2;
		}
		id = argv[2];
		fmt = ONE_JOB;
		i = 3;
	} else if (strcmp(cmd, "status")) {
		fprintf(stderr, "copusctl: unknown command '%s'\n", cmd);
		usage(stderr);
		return 2;
	}
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "--state-dir") && i + 1 < argc) {
			dir = argv[++i];
		} else if (!strncmp(argv[i], "--state-dir=", 12)) {
			dir = argv[i] + 12;
		} else if (!strcmp(argv[i], "--json") &&
			   !strcmp(cmd, "status")) {
			fmt = JSON;
		} else {
			fprintf(stderr, "copusctl: unknown option '%s'\n",
				argv[i]);
			usage(stderr);
			return 2;
		}
	}
	if (!dir) {
		conf_dir = state_save_location();
		if (!conf_dir)
			return 1;
		dir = conf_dir;
	}
	path = malloc(strlen(dir) + strlen(file) + 2);
	if (!path) {
		fprintf(stderr, "copusctl: out of memory\n");
		return 1;
	}
	sprintf(path, "%s/%s", dir, file);
	rc = !strcmp(cmd, "stats") ? print_stats(path) :
				     print_status(path, fmt, id);
	free(path);
	free(conf_dir);
	return rc;
}

/*
 * copus-sim's history of finished jobs (the plugin's format, copus/predict.h):
 * read with --history for the predictor to know before the first round,
 * written with --save-history from the jobs that finished.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/*
 * Reads a history file (as the plugin's StateSaveLocation/copus_history).
 * Unlike the plugin, which skips a line cut short by a crash, the
 * simulator refuses any bad line: its input must be what was meant.
 */
int read_history(const char *path, copus_history_entry **history,
		 size_t *nhistory)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0, lineno = 0, n = 0, room = 0;
	int rc = COPUS_EINVAL;

	if (f == NULL) {
		fprintf(stderr, "copus-sim: --history: %s: %s\n", path,
			strerror(errno));
		return COPUS_EIO;
	}
	while (getline(&line, &cap, f) >= 0) {
		const char *why;

		if (++lineno == 1) {
			if (strcmp(line, COPUS_HISTORY_MAGIC "\n") != 0) {
				fprintf(stderr,
					"copus-sim: %s line 1: not a "
					"copus history (expected \"%s\")\n",
					path, COPUS_HISTORY_MAGIC);
				goto out;
			}
			continue;
		}
		if (n == room) {
			size_t nr = room ? 2 * room : 1024;
			copus_history_entry *g =
				realloc(*history, nr * sizeof(*g));
			if (g == NULL) {
				rc = COPUS_ENOMEM;
				goto out;
			}
			*history = g;
			room = nr;
		}
		if (copus_history_parse(line, &(*history)[n], &why) !=
		    COPUS_OK) {
			fprintf(stderr, "copus-sim: %s line %zu: %s\n", path,
				lineno, why);
			goto out;
		}
		n++;
	}
	if (lineno == 0) {
		fprintf(stderr, "copus-sim: %s: empty, not a copus history\n",
			path);
		goto out;
	}
	*nhistory = n;
	rc = COPUS_OK;
out:
	free(line);
	fclose(f);
	return rc;
}

/* Writes the jobs that finished, workload by workload (beside, renamed). */
int write_history(const char *path, const struct wl *w, size_t nw)
{
	char tmp[4096], buf[160];
	FILE *f;
	int rc = COPUS_OK;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	if ((f = fopen(tmp, "w")) == NULL) {
		fprintf(stderr, "copus-sim: --save-history: %s: %s\n", tmp,
			strerror(errno));
		return COPUS_EIO;
	}
	fprintf(f, "%s\n", COPUS_HISTORY_MAGIC);
	for (size_t i = 0; i < nw && rc == COPUS_OK; i++)
		for (size_t k = 0; k < w[i].res.nfinished && rc == COPUS_OK;
		     k++) {
			rc = copus_history_format(&w[i].res.finished[k], buf,
						  sizeof(buf));
			if (rc == COPUS_OK)
				fputs(buf, f);
		}
	if (fflush(f) != 0 || ferror(f) || fsync(fileno(f)) != 0)
		rc = COPUS_EIO;
	if (fclose(f) != 0)
		rc = COPUS_EIO;
	if (rc == COPUS_OK && rename(tmp, path) != 0)
		rc = COPUS_EIO;
	if (rc != COPUS_OK) {
		fprintf(stderr, "copus-sim: --save-history: %s: %s\n", path,
			copus_strerror(rc));
		unlink(tmp);
	}
	return rc;
}

/*
 * History lines: finished jobs as the predictor learns them, one per line
 * (see copus/predict.h). Parsing and formatting only; no I/O.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <copus/predict.h>

static const char *entry_check(const copus_history_entry *e)
{
	if (!isfinite(e->work) || e->work <= 0.0)
		return "WORK is not a positive number";
	if (e->gpus < 1)
		return "GPUS is below 1";
	if (!isfinite(e->batch) || e->batch < 0.0)
		return "BATCH is not a number >= 0";
	if (memchr(e->user, '\0', sizeof(e->user)) == NULL ||
	    memchr(e->app, '\0', sizeof(e->app)) == NULL)
		return "USER or NAME is not terminated";
	for (const char *u = e->user; *u; u++)
		if ((unsigned char)*u <= ' ')
			return "USER holds a space or a control character";
	return NULL;
}

int copus_history_parse(const char *line, copus_history_entry *e,
			const char **why)
{
	char user[sizeof(e->user)];
	int used = 0;
	size_t len;
	const char *name;

	*why = NULL;
	memset(e, 0, sizeof(*e));
	len = line != NULL ? strlen(line) : 0;
	if (len == 0 || line[len - 1] != '\n') {
		*why = "incomplete line";
		return COPUS_EINVAL;
	}
	if (sscanf(line, "%lf %d %lf %15s %n", &e->work, &e->gpus, &e->batch,
		   user, &used) != 4 || used == 0) {
		*why = "expected WORK GPUS BATCH USER NAME";
		return COPUS_EINVAL;
	}
	/* The name, less the newline (which the scan took if it is empty). */
	name = line + used;
	len = strlen(name);
	if (len > 0)
		len--;
	if (len >= sizeof(e->app)) {
		*why = "NAME is too long";
		return COPUS_EINVAL;
	}
	memcpy(e->app, name, len);
	e->app[len] = '\0';
	if (strcmp(user, "-") != 0)
		memcpy(e->user, user, sizeof(user));
	if ((*why = entry_check(e)) != NULL)
		return COPUS_EINVAL;
	return COPUS_OK;
}

int copus_history_format(const copus_history_entry *e, char *buf, size_t len)
{
	char app[sizeof(e->app)];
	int n;

	if (entry_check(e) != NULL)
		return COPUS_EINVAL;
	memcpy(app, e->app, sizeof(app));
	for (char *a = app; *a; a++)
		if ((unsigned char)*a < ' ')
			*a = ' ';
	n = snprintf(buf, len, "%.9g %d %.9g %s %s\n", e->work, e->gpus,
		     e->batch, e->user[0] ? e->user : "-", app);
	if (n < 0 || (size_t)n >= len)
		return COPUS_ERANGE;
	return COPUS_OK;
}

copus_job_attrs copus_history_attrs(const copus_history_entry *e)
{
	return (copus_job_attrs){ .application = e->app,
				  .user = e->user[0] ? e->user : NULL,
				  .gpus = e->gpus,
				  .batch = e->batch };
}

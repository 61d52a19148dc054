/*
 * Fuzz target: copus_history_parse(), one line of the finished-jobs history
 * (StateSaveLocation/copus_history, copus-sim --history): a file that
 * outlives crashes and upgrades, and whose names come from users' jobs. An
 * accepted line must hold a valid entry, which copus_history_format() must
 * write as a line that parses back to the same entry.
 */
#include <math.h>

#include <copus/predict.h>

#include "fuzz.h"

static void check_entry(const copus_history_entry *e)
{
	FUZZ_CHECK(isfinite(e->work) && e->work > 0);
	FUZZ_CHECK(e->gpus >= 1);
	FUZZ_CHECK(isfinite(e->batch) && e->batch >= 0);
	FUZZ_CHECK(memchr(e->user, '\0', sizeof(e->user)) != NULL);
	FUZZ_CHECK(memchr(e->app, '\0', sizeof(e->app)) != NULL);
	for (const char *u = e->user; *u; u++)
		FUZZ_CHECK((unsigned char)*u > ' ');
}

/* The name as the writer leaves it: control characters become spaces. */
static void written_name(const char *app, char *out, size_t len)
{
	snprintf(out, len, "%s", app);
	for (char *a = out; *a; a++)
		if ((unsigned char)*a < ' ')
			*a = ' ';
}

static int close_to(double a, double b)
{
	/* %.9g keeps nine significant digits. */
	return fabs(a - b) <= 1e-8 * fmax(fabs(a), fabs(b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line = fuzz_text(data, size), out[256], again[256];
	char name[sizeof(((copus_history_entry *)0)->app)];
	copus_history_entry e, back, third;
	const char *why = "unset";
	const char *start;

	if (copus_history_parse(line, &e, &why) != COPUS_OK) {
		/* A rejection names the field, for the log line. */
		FUZZ_CHECK(why != NULL && why[0] != '\0');
		free(line);
		return 0;
	}
	FUZZ_CHECK(why == NULL);
	check_entry(&e);
	FUZZ_CHECK(copus_history_format(&e, out, sizeof(out)) == COPUS_OK);
	FUZZ_CHECK(strchr(out, '\n') == out + strlen(out) - 1);
	FUZZ_CHECK(copus_history_parse(out, &back, &why) == COPUS_OK);
	FUZZ_CHECK(close_to(back.work, e.work));
	FUZZ_CHECK(back.gpus == e.gpus);
	FUZZ_CHECK(close_to(back.batch, e.batch));
	FUZZ_CHECK(strcmp(back.user, e.user) == 0);
	/*
	 * The reader skips the blanks before a name, so a name whose first
	 * characters the writer turned into spaces comes back without them.
	 */
	written_name(e.app, name, sizeof(name));
	start = name + strspn(name, " ");
	FUZZ_CHECK(strcmp(back.app, start) == 0);
	/* Written once, the line is stable: the file does not drift. */
	FUZZ_CHECK(copus_history_format(&back, again, sizeof(again)) ==
		   COPUS_OK);
	FUZZ_CHECK(copus_history_parse(again, &third, &why) == COPUS_OK);
	FUZZ_CHECK(copus_history_format(&third, out, sizeof(out)) == COPUS_OK);
	FUZZ_CHECK(strcmp(out, again) == 0);
	free(line);
	return 0;
}

/*
 * The files of sched/copus in StateSaveLocation (see statefile.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "slurm-compat.h"

#include "copus/error.h"
#include "copus/predict.h"
#include "options.h"
#include "round.h"
#include "sched_copus.h"
#include "statefile.h"
#include "statefmt.h"

/* Files replaced whole */
static FILE *_replace_begin(const char *path);
static int _replace_end(FILE *f, const char *path);

/* copus_history */
static void _history_fmt(char **buf, const copus_history_entry *o);
static void _history_append(struct copus__sched *s, const char *dir,
			    const copus_history_entry *o, int n);

/* copus_status */
static void _kind(const struct copus__round_job *j, char *buf, size_t len);

/*
 * The files the plugin replaces whole (copus_state, copus_status, the
 * compacted copus_history) are written beside as NAME.new, flushed to
 * disk and renamed over NAME: a reader, or slurmctld after a crash, finds
 * the old file or the new one, never a part of one.
 */
static FILE *_replace_begin(const char *path)
{
	char *tmp = xstrdup_printf("%s.new", path);
	FILE *f = fopen(tmp, "w");

	if (!f)
		error("%s: cannot write %s: %m", plugin_type, tmp);
	xfree(tmp);
	return f;
}

/* Ends _replace_begin (f is closed): 0, or -1 and the old file stays. */
static int _replace_end(FILE *f, const char *path)
{
	char *tmp = xstrdup_printf("%s.new", path);
	int rc = fflush(f) || fsync(fileno(f));

	rc = fclose(f) || rc;
	if (rc || rename(tmp, path)) {
		error("%s: cannot replace %s: %m", plugin_type, path);
		rc = -1;
	}
	xfree(tmp);
	return rc;
}

#define _STATE_FILE "copus_state"
#define _STATE_MAGIC1 "copus-state 1"
#define _STATE_MAGIC "copus-state 2"

/* One record into copus_state (statefmt.h). */
static void _state_put(FILE *f, const char *path,
		       const struct copus__state_rec *r)
{
	char buf[256];

	if (copus__state_format(r, buf, sizeof(buf)) == 0)
		fputs(buf, f);
	else
		error("%s: %s: a record of job %u is out of range; not saved",
		      plugin_type, path,
		      r->kind == COPUS__STATE_JOB	? r->job.id :
		      r->kind == COPUS__STATE_REVIVED ? r->revived.id :
							r->rescale.id);
}

/*
 * The rescales in flight and what the plugin learned about each job (its
 * original request, service received, most GPUs held) survive a slurmctld
 * restart in StateSaveLocation/copus_state, replaced atomically (written
 * beside, flushed, renamed): a job that checkpoints while slurmctld is down
 * is still given its new cell when it comes back. The hints themselves
 * need no saving: they live in the jobs' Comments, which Slurm saves.
 */
void copus__state_save(struct copus__sched *s, const char *dir)
{
	char *path;
	FILE *f;
	int i;

	if (!s->state_dirty || !dir)
		return;
	path = xstrdup_printf("%s/%s", dir, _STATE_FILE);
	if (!(f = _replace_begin(path))) {
		xfree(path);
		return;
	}
	fprintf(f, "%s\n", _STATE_MAGIC);
	for (i = 0; i < s->nrescales; i++) {
		struct copus__state_rec r = { .kind = COPUS__STATE_RESCALE };

		r.rescale = s->rescales[i];
		_state_put(f, path, &r);
	}
	/* A job already learned from is in copus_history: not again. */
	for (i = 0; i < s->nmemo; i++) {
		const struct copus__memo *m = &s->memo[i];
		struct copus__state_rec r = { .kind = COPUS__STATE_JOB };

		if ((m->req_gpus <= 0 && !m->launched) || m->learned)
			continue;
		r.job.id = m->id;
		r.job.req_gpus = m->req_gpus;
		r.job.max_had = m->max_had;
		r.job.attained = m->attained;
		r.job.rate = m->rate;
		r.job.submit = m->submit;
		r.job.launched = m->launched;
		snprintf(r.job.type, sizeof(r.job.type), "%s", m->type_req);
		r.job.type_known = m->type_known;
		_state_put(f, path, &r);
	}
	for (i = 0; i < s->nmemo; i++) {
		const struct copus__memo *m = &s->memo[i];
		struct copus__state_rec r = { .kind = COPUS__STATE_REVIVED };

		if (!m->revived_end)
			continue;
		r.revived.id = m->id;
		r.revived.rc = m->revived_rc;
		r.revived.end = m->revived_end;
		_state_put(f, path, &r);
	}
	for (i = 0; i < s->usage.n; i++) {
		struct copus__state_rec r = { .kind = COPUS__STATE_USER };

		r.user = s->usage.u[i];
		_state_put(f, path, &r);
	}
	if (_replace_end(f, path) == 0) {
		s->state_dirty = false;
		s->usage.saved = time(NULL);
	}
	xfree(path);
}

void copus__state_load(struct copus__sched *s, const char *dir)
{
	char *path, line[256];
	FILE *f;
	int lineno = 0, njobs = 0, nusers = 0;

	if (!dir)
		return;
	path = xstrdup_printf("%s/%s", dir, _STATE_FILE);
	f = fopen(path, "r");
	if (!f) {
		xfree(path);
		return;
	}
	s->nrescales = 0;
	while (fgets(line, sizeof(line), f)) {
		struct copus__state_rec r;
		const char *why;

		lineno++;
		if (lineno == 1) {
			if (strcmp(line, _STATE_MAGIC "\n") &&
			    strcmp(line, _STATE_MAGIC1 "\n")) {
				error("%s: %s:1: not a copus state file "
				      "(expected '%s'); ignoring it",
				      plugin_type, path, _STATE_MAGIC);
				break;
			}
			continue;
		}
		if (!strchr(line, '\n') && !feof(f)) {
			int c;

			/* Longer than any record: skip the rest of it. */
			while ((c = fgetc(f)) != EOF && c != '\n')
				;
			error("%s: %s:%d: line too long; ignoring it",
			      plugin_type, path, lineno);
			continue;
		}
		if (copus__state_parse(line, &r, &why)) {
			error("%s: %s:%d: bad record '%.60s' (%s); ignoring it",
			      plugin_type, path, lineno, line, why);
			continue;
		}
		if (r.kind == COPUS__STATE_USER) {
			copus__usage_charge(&s->usage, r.user.uid,
					    r.user.gpu_s);
			nusers++;
			continue;
		}
		if (r.kind == COPUS__STATE_REVIVED) {
			struct copus__memo *in =
				copus__memo_get(s, r.revived.id);

			if (in) {
				in->revived_rc = r.revived.rc;
				in->revived_end = r.revived.end;
			}
			continue;
		}
		if (r.kind == COPUS__STATE_JOB) {
			struct copus__memo *in = copus__memo_get(s, r.job.id);

			if (!in)
				continue;
			in->req_gpus = r.job.req_gpus;
			in->max_had = r.job.max_had;
			in->attained = r.job.attained;
			in->rate = r.job.rate;
			copus__memo_submit(in, r.job.submit);
			in->launched = r.job.launched;
			in->launched_before = r.job.launched != 0;
			if (r.job.type_known) {
				snprintf(in->type_req, sizeof(in->type_req),
					 "%s", r.job.type);
				in->type_known = true;
			}
			njobs++;
			continue;
		}
		if (s->nrescales == COPUS__RESCALE_MAX) {
			error("%s: %s:%d: more than %d rescales; ignoring the "
			      "rest", plugin_type, path, lineno,
			      COPUS__RESCALE_MAX);
			continue;
		}
		s->rescales[s->nrescales++] = r.rescale;
	}
	fclose(f);
	if (s->nrescales || njobs || nusers)
		info("%s: recovered %d rescale(s) in flight, %d job "
		     "record(s) and the usage of %d user(s) from %s",
		     plugin_type, s->nrescales, njobs, nusers, path);
	xfree(path);
}

/*
 * The completed jobs the predictor learned from, kept across slurmctld
 * restarts in StateSaveLocation/copus_history: a first line naming the
 * format, then one line per job, "WORK GPUS BATCH USER NAME" (the name last,
 * as it may hold spaces), appended and flushed as jobs complete. At start
 * the most recent _HISTORY_KEEP jobs go back to the predictor in one
 * training; a line that does not parse (a write cut short by a crash) is
 * logged with its number and skipped; a file grown to twice that many lines
 * (at start or as jobs complete) is rewritten with the kept jobs (beside,
 * flushed, renamed).
 */
#define _HISTORY_FILE "copus_history"
#define _HISTORY_KEEP 4096

/* One history line. */
static void _history_fmt(char **buf, const copus_history_entry *o)
{
	char line[160];

	if (copus_history_format(o, line, sizeof(line)) == COPUS_OK)
		xstrcat(*buf, line);
}

static void _history_append(struct copus__sched *s, const char *dir,
			    const copus_history_entry *o, int n)
{
	char *path, *buf = NULL;
	int fd, i;
	struct stat st;

	if (!dir || n <= 0)
		return;
	path = xstrdup_printf("%s/%s", dir, _HISTORY_FILE);
	fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || fstat(fd, &st)) {
		error("%s: cannot record completed jobs in %s: %m",
		      plugin_type, path);
		goto out;
	}
	if (st.st_size == 0) {
		xstrfmtcat(buf, "%s\n", COPUS_HISTORY_MAGIC);
	} else {
		/* After a write cut short, start on a line of its own. */
		char last = '\n';

		if (pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n')
			xstrcat(buf, "\n");
	}
	for (i = 0; i < n; i++)
		_history_fmt(&buf, &o[i]);
	if (write(fd, buf, strlen(buf)) != (ssize_t)strlen(buf) || fsync(fd))
		error("%s: cannot record completed jobs in %s: %m",
		      plugin_type, path);
	s->history_lines += n;
out:
	if (fd >= 0)
		close(fd);
	xfree(buf);
	xfree(path);
	if (s->history_lines > 2 * _HISTORY_KEEP)
		copus__history_load(s, dir, false);
}

void copus__history_load(struct copus__sched *s, const char *dir, bool learn)
{
	char *path, *buf = NULL, line[256];
	copus_history_entry *ring = NULL;
	copus_job_attrs *attrs = NULL;
	double *work = NULL;
	long total = 0, bad = 0;
	int lineno = 0, n, i, rc;
	FILE *f;

	if (!dir || (learn && !s->predictor))
		return;
	path = xstrdup_printf("%s/%s", dir, _HISTORY_FILE);
	if (!(f = fopen(path, "r"))) {
		if (errno != ENOENT)
			error("%s: cannot read %s: %m", plugin_type, path);
		xfree(path);
		return;
	}
	ring = xcalloc(_HISTORY_KEEP, sizeof(*ring));
	while (fgets(line, sizeof(line), f)) {
		const char *why = NULL;
		copus_history_entry o;

		if (++lineno == 1) {
			if (strcmp(line, COPUS_HISTORY_MAGIC "\n")) {
				error("%s: %s line 1: not a copus history "
				      "(expected \"%s\"); not used",
				      plugin_type, path, COPUS_HISTORY_MAGIC);
				s->history_lines = 0;
				goto out;
			}
			continue;
		}
		if (copus_history_parse(line, &o, &why) != COPUS_OK) {
			if (++bad <= 10 && learn)
				error("%s: %s line %d: %s; skipped", plugin_type,
				      path, lineno, why);
			/* The rest of an over-long line. */
			while (!strchr(line, '\n') &&
			       fgets(line, sizeof(line), f))
				;
			continue;
		}
		ring[total++ % _HISTORY_KEEP] = o;
	}
	n = total < _HISTORY_KEEP ? (int)total : _HISTORY_KEEP;
	s->history_lines = total + bad;
	attrs = xcalloc(n + 1, sizeof(*attrs));
	work = xcalloc(n + 1, sizeof(*work));
	for (i = 0; i < n; i++) {
		copus_history_entry *o = &ring[(total - n + i) %
					       _HISTORY_KEEP];

		attrs[i] = copus_history_attrs(o);
		work[i] = o->work;
		if (s->history_lines > 2 * _HISTORY_KEEP)
			_history_fmt(&buf, o);
	}
	if (learn) {
		rc = copus_predictor_add_many(s->predictor, attrs, work,
					      (size_t)n);
		if (rc != COPUS_OK)
			error("%s: %s: the predictor refused the history: %s",
			      plugin_type, path, copus_strerror(rc));
		else
			info("%s: predictor: %d completed job(s) from %s (%ld "
			     "line(s) skipped)", plugin_type, n, path, bad);
	}
	if (s->history_lines > 2 * _HISTORY_KEEP) {
		FILE *w = _replace_begin(path);

		if (w) {
			fprintf(w, "%s\n%s", COPUS_HISTORY_MAGIC, buf ? buf : "");
			if (_replace_end(w, path) == 0)
				s->history_lines = n;
		}
	}
out:
	fclose(f);
	xfree(ring);
	xfree(attrs);
	xfree(work);
	xfree(buf);
	xfree(path);
}

void copus__history_learn(struct copus__sched *s, const char *dir,
			  const copus_history_entry *obs, int nobs)
{
	int i, rc;

	if (!s->predictor)
		return;
	for (i = 0; i < nobs; i++) {
		copus_job_attrs a = copus_history_attrs(&obs[i]);

		rc = copus_predictor_add(s->predictor, &a, obs[i].work);
		if (rc != COPUS_OK)
			verbose("%s: predictor: cannot learn a job of %s: %s",
				plugin_type, obs[i].app, copus_strerror(rc));
	}
	_history_append(s, dir, obs, nobs);
	if (nobs)
		debug("%s: predictor: %zu completed job(s) known, trained %zu "
		      "time(s)", plugin_type,
		      copus_predictor_count(s->predictor),
		      copus_predictor_trainings(s->predictor));
}

/* Text of the job's kind: "rigid" or "elastic:MIN-MAX". */
static void _kind(const struct copus__round_job *j, char *buf, size_t len)
{
	if (j->rigid && !j->silent && !j->fixed)
		snprintf(buf, len, "rigid");
	else
		snprintf(buf, len, "elastic:%d-%d", j->emin, j->emax);
}

/*
 * What the plugin makes of a job's hint: "-" (none), "old run" (none from
 * its current run: kept as it is), "distrusted: claims 3.2x" (its model
 * claims that many times the progress seen: ignored), "ok".
 */
static void _hint_verdict(const struct copus__memo *in,
			  const struct copus__round_job *j, char *buf,
			  size_t len)
{
	if (!in || !in->have_hint)
		snprintf(buf, len, "-");
	else if (j->silent)
		snprintf(buf, len, "old run");
	else if (in->claim_ratio > COPUS__DISTRUST)
		snprintf(buf, len, "distrusted: claims %.1fx",
			 isfinite(in->claim_ratio) ? in->claim_ratio : 999.0);
	else
		snprintf(buf, len, "ok");
}

/*
 * The admin's view of the last round: StateSaveLocation/copus_status, a
 * comment line with the round's figures, a header, then one line per job
 * (running, then pending), tab-separated (copusctl prints it as a table);
 * replaced atomically (written beside, flushed, renamed) so that a reader
 * never sees half a file.
 */
void copus__status_write(struct copus__sched *s, struct copus__round *r)
{
	char *path = NULL, when[32], kind[32], nodes[256];
	char speed[16], left[16], hint[48], plan[48], iter[24], fs[16];
	char hist[160];
	struct tm tm;
	FILE *f = NULL;
	int i, k, pass;

	if (!r->state_dir)
		return;
	path = xstrdup_printf("%s/copus_status", r->state_dir);
	if (!(f = _replace_begin(path))) {
		xfree(path);
		return;
	}
	localtime_r(&r->when, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(f, "# sched/copus round at %s (every %d s, policy %s): %d "
		"pending considered, %d running; took %.3f ms (snapshot %.3f, "
		"decision %.3f, actions %.3f)%s%s\n", when, s->params.interval,
		s->params.policy, r->npending, r->nrunning,
		r->t_snap + r->t_decide + r->t_act, r->t_snap, r->t_decide,
		r->t_act, r->error[0] ? "; " : "", r->error);
	fprintf(f, "JOBID\tSTATE\tKIND\tTYPE\tGPUS\tNODES\tSPEEDUP\t"
		"REMAINING\tPLAN\tITER_S\tDECISION\tNODELIST\tFAIRSHARE\t"
		"RESCALES\tHINT\n");
	for (pass = 0; pass < 2; pass++)
	for (i = 0; i < r->nrj; i++) {
		const struct copus__round_job *j = &r->rj[i];
		const copus_decision *d =
			r->decided && j->job >= 0 ? &r->dec[j->job] : NULL;
		const copus_job *c = j->job >= 0 ? &r->jobs[j->job] : NULL;
		const char *state, *type, *reason;
		const struct copus__plan *pl = NULL;
		int gpus, nn, t;

		if (j->running != (pass == 0))
			continue;
		_kind(j, kind, sizeof(kind));
		snprintf(nodes, sizeof(nodes), "-");
		if (j->running) {
			state = j->in_rescale ? "RESCALING" : "RUNNING";
			t = j->alloc_type;
			gpus = j->cur_gpus;
			nn = j->nalloc;
			snprintf(nodes, sizeof(nodes), "%s",
				 j->nodelist ? j->nodelist : "-");
		} else if (d && d->gpu_type >= 0) {
			state = j->action == COPUS__ACT_START ? "STARTING" :
								"PENDING";
			t = d->gpu_type;
			gpus = j->per_node * j->num_nodes;
			nn = j->num_nodes;
			if (j->action == COPUS__ACT_START) {
				nodes[0] = '\0';
				for (k = 0; k < d->num_slots; k++)
					snprintf(nodes + strlen(nodes),
						 sizeof(nodes) - strlen(nodes),
						 "%s%s", k ? "," : "",
						 r->names[d->slots[k].node]);
			}
		} else {
			state = j->action == COPUS__ACT_START ? "STARTING" :
								"PENDING";
			t = -1;
			gpus = j->gpn_req * j->nodes_req;
			nn = j->nodes_req;
		}
		type = t >= 0 ? r->types[t] :
		       j->type_req[0] ? j->type_req : "-";
		snprintf(speed, sizeof(speed), "-");
		snprintf(left, sizeof(left), "-");
		if (c && c->models && t >= 0 && c->models[t] && nn > 0) {
			double up = copus__model_speedup(c->models[t], nn,
							 gpus / nn);

			if (up > 0)
				snprintf(speed, sizeof(speed), "%.2f", up);
		}
		if (c && c->remaining >= 0)
			snprintf(left, sizeof(left), "%.0fs", c->remaining);
		reason = d ? d->reason : j->reason ? j->reason :
			 j->running ? "rigid: keeps its GPUs" : "-";
		if (j->reason && !j->running)
			reason = j->reason;
		if (!strncmp(reason, "copus: ", 7))
			reason += 7;
		_hint_verdict(copus__memo_find(s, j->id), j, hint,
			      sizeof(hint));
		/* The plan of the cell the line shows (plans.h). */
		if (j->planned && t >= 0)
			pl = copus__plan_find(j->plans, j->ncells, t, gpus, nn);
		copus__plan_name(pl, plan, sizeof(plan));
		snprintf(iter, sizeof(iter), "-");
		if (pl)
			snprintf(iter, sizeof(iter), "%.4g", pl->seconds);
		snprintf(fs, sizeof(fs), "-");
		if (c && c->fairshare > 0)
			snprintf(fs, sizeof(fs), "%.3f", c->fairshare);
		copus__memo_history(copus__memo_find(s, j->id), hist,
				    sizeof(hist));
		fprintf(f, "%u\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s"
			"\t%s\t%s\t%s\n", j->id, state, kind, type, gpus, nn,
			speed, left, plan, iter, reason[0] ? reason : "-",
			nodes, fs, hist, hint);
	}
	_replace_end(f, path);
	xfree(path);
}

/* Prometheus names a counter's samples ..._total. */
static const char *_suffix(const char *kind)
{
	return strcmp(kind, "counter") ? "" : "_total";
}

void copus__stats_write(struct copus__sched *s, const char *dir)
{
	const struct copus__stats *st = &s->stats;
	char *path, *prom;
	FILE *f;

	if (!dir)
		return;
	path = xstrdup_printf("%s/copus_stats", dir);
	prom = xstrdup_printf("%s/copus_metrics.prom", dir);
	if ((f = _replace_begin(path))) {
		fprintf(f, "# sched/copus counters since %ld (name, value, "
			"meaning)\n", (long)s->started);
#define COPUS__STATS_LINE(name, kind, help) \
		fprintf(f, "%s\t%.6g\t%s\n", #name, st->name, help);
		COPUS__STATS(COPUS__STATS_LINE)
#undef COPUS__STATS_LINE
		copus__lock_stats_rows(st, f);
		_replace_end(f, path);
	}
	if ((f = _replace_begin(prom))) {
#define COPUS__STATS_PROM(name, kind, help)                                  \
		fprintf(f, "# HELP copus_%s%s %s.\n# TYPE copus_%s%s %s\n" \
			"copus_%s%s %.6g\n", #name, _suffix(#kind), help,     \
			#name, _suffix(#kind), #kind, #name, _suffix(#kind),   \
			st->name);
		COPUS__STATS(COPUS__STATS_PROM)
#undef COPUS__STATS_PROM
		copus__lock_stats_prom(st, f);
		fprintf(f, "# HELP copus_start_time_seconds When slurmctld "
			"loaded sched/copus.\n# TYPE copus_start_time_seconds "
			"gauge\ncopus_start_time_seconds %ld\n",
			(long)s->started);
		_replace_end(f, prom);
	}
	xfree(path);
	xfree(prom);
}

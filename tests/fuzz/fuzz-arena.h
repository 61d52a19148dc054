/*
 * What the fuzz targets of copus-sim --arena's reader (sim/arena.c)
 * share: the directory arena_world_read() reads, made in the scratch
 * directory, with small valid contents for the files a target does not
 * fuzz, and the invariants of a world read. Reader: whoever adds such a
 * target.
 */
#ifndef COPUS_FUZZ_ARENA_H
#define COPUS_FUZZ_ARENA_H

#include <math.h>

#include "arena.h"

#include "fuzz.h"

/* Two GPU types, one with the GPUs per node Arena knows. */
#define FUZZ_ARENA_SPEC                                                       \
	"[{\"g4\": {\"node_num\": 2, \"gpus_per_node\": 4},"                  \
	" \"a40\": {\"node_num\": 2}}]\n"

/* One family in two sizes, a cell that does not fit and one of a type the
 * cluster lacks. */
#define FUZZ_ARENA_DB                                                         \
	"{\"optimal\": {\n"                                                   \
	" \"tf_1B_64\": {\"1_g4_1_n_1_d\": 2.0, \"1_g4_1_n_4_d\": 0.8,\n"     \
	"               \"2_g4_2_n_4_d\": -1, \"1_h100_1_n_1_d\": 1.0},\n"    \
	" \"tf_2B_64\": {\"1_a40_1_n_2_d\": 3.0}\n"                           \
	"}}\n"

#define FUZZ_ARENA_TRACE                                                      \
	"job_id,submission_time,num_iteration,model_name,deadline,"           \
	"batch_size,num_gpu,gpu_type\n"                                       \
	"a,0,10,tf__1B,0,64,1,g4\n"

/* The world's directory, made with its subdirectories on the first call. */
static inline const char *fuzz_arena_dir(void)
{
	static const char *const subs[] = { "resources", "database", "traces",
					    "planner" };
	static char dir[512];

	if (dir[0] == '\0') {
		snprintf(dir, sizeof(dir), "%s/arena", fuzz_scratch());
		FUZZ_CHECK(mkdir(dir, 0700) == 0);
		for (size_t i = 0; i < sizeof(subs) / sizeof(*subs); i++) {
			char path[600];

			snprintf(path, sizeof(path), "%s/%s", dir, subs[i]);
			FUZZ_CHECK(mkdir(path, 0700) == 0);
		}
	}
	return dir;
}

/* The files of the world and the lines each holds now. */
static const char *const fuzz_arena_files[] = {
	"resources/sim_cluster_spec.json", "database/prof_database.json",
	"traces/simulate_trace_philly.csv", "planner/models.csv"
};

static inline long *fuzz_arena_lines(void)
{
	static long lines[sizeof(fuzz_arena_files) /
			  sizeof(*fuzz_arena_files)];

	return lines;
}

/* Write (or, for data NULL, remove) the file name of the world. */
static inline void fuzz_arena_put(const char *name, const uint8_t *data,
				  size_t size)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s", fuzz_arena_dir(), name);
	if (data == NULL)
		unlink(path);
	else
		fuzz_write_file(path, data, size);
	for (size_t i = 0;
	     i < sizeof(fuzz_arena_files) / sizeof(*fuzz_arena_files); i++)
		if (strcmp(fuzz_arena_files[i], name) == 0)
			fuzz_arena_lines()[i] =
				data ? fuzz_lines(data, size) : 0;
}

/* The NUL-terminated name of 1 to sizeof(s) - 1 characters. */
#define FUZZ_ARENA_NAME_OK(s)                                                 \
	FUZZ_CHECK(strnlen((s), sizeof(s)) >= 1 &&                            \
		   strnlen((s), sizeof(s)) < sizeof(s))

static inline bool fuzz_arena_job_size(int g)
{
	return g == 1 || g == 2 || g == 4 || g == 8 || g == 16;
}

/* A world as arena_world_read() leaves it. */
static inline void fuzz_arena_check(const struct arena_world *w)
{
	FUZZ_CHECK(w->ntypes >= 1 && w->ntypes <= ARENA_MAX_TYPES);
	for (int t = 0; t < w->ntypes; t++) {
		FUZZ_ARENA_NAME_OK(w->type_names[t]);
		FUZZ_CHECK(strchr(w->type_names[t], '_') == NULL);
		FUZZ_CHECK(w->node_num[t] >= 1 && w->per_node[t] >= 1);
		for (int u = 0; u < t; u++)
			FUZZ_CHECK(strcmp(w->type_names[u],
					  w->type_names[t]) != 0);
	}
	FUZZ_CHECK(w->nfamilies >= 1 && w->nfamilies <= ARENA_MAX_FAMILIES);
	for (int f = 0; f < w->nfamilies; f++) {
		const struct arena_family *fa = &w->families[f];

		FUZZ_ARENA_NAME_OK(fa->name);
		FUZZ_CHECK(fa->nsizes >= 1 && fa->nsizes <= ARENA_MAX_SIZES);
		for (int s = 0; s < fa->nsizes; s++) {
			FUZZ_ARENA_NAME_OK(fa->sizes[s]);
			FUZZ_CHECK(isfinite(fa->params[s]) &&
				   fa->params[s] > 0);
			FUZZ_CHECK(s == 0 || fa->params[s] >= fa->params[s - 1]);
		}
	}
	FUZZ_CHECK(w->ndb == 0 || w->db != NULL);
	for (size_t i = 0; i < w->ndb; i++) {
		const struct arena_entry *e = &w->db[i];

		FUZZ_CHECK(e->family >= 0 && e->family < w->nfamilies);
		FUZZ_CHECK(e->size >= 0 &&
			   e->size < w->families[e->family].nsizes);
		FUZZ_CHECK(e->batch >= 1);
		FUZZ_CHECK(e->type >= 0 && e->type < w->ntypes);
		FUZZ_CHECK(e->nodes >= 1 && e->per >= 1);
		FUZZ_CHECK(isfinite(e->seconds) &&
			   (e->seconds > 0 || e->seconds == -1));
		/* One entry a model, batch and cell. */
		for (size_t k = 0; k < i; k++)
			FUZZ_CHECK(w->db[k].family != e->family ||
				   w->db[k].size != e->size ||
				   w->db[k].batch != e->batch ||
				   w->db[k].type != e->type ||
				   w->db[k].nodes != e->nodes ||
				   w->db[k].per != e->per);
	}
	FUZZ_CHECK(w->nmodels >= 1 && w->models != NULL);
	for (size_t m = 0; m < w->nmodels; m++) {
		const struct arena_model *mo = &w->models[m];

		FUZZ_CHECK(mo->family >= 0 && mo->family < w->nfamilies);
		FUZZ_CHECK(mo->size >= 0 &&
			   mo->size < w->families[mo->family].nsizes);
		FUZZ_CHECK(mo->batch >= 1);
		FUZZ_CHECK(mo->ncells >= 0 &&
			   (mo->ncells == 0 || mo->cells != NULL));
		for (int i = 0; i < mo->ncells; i++) {
			const copus_cell_time *c = &mo->cells[i];
			double sec;

			FUZZ_CHECK(c->gpu_type >= 0 && c->gpu_type < w->ntypes);
			FUZZ_CHECK(fuzz_arena_job_size(c->gpus));
			FUZZ_CHECK(c->nodes >= 1 && c->gpus % c->nodes == 0);
			FUZZ_CHECK(c->nodes <= w->node_num[c->gpu_type] &&
				   c->gpus / c->nodes <=
					   w->per_node[c->gpu_type]);
			FUZZ_CHECK(isfinite(c->seconds) && c->seconds > 0);
			FUZZ_CHECK(arena_cell_seconds(mo, c->gpu_type, c->gpus,
						      c->nodes, &sec) &&
				   sec == c->seconds);
		}
	}
	FUZZ_CHECK(w->njobs >= 1 && w->jobs != NULL);
	for (size_t i = 0; i < w->njobs; i++) {
		const struct arena_job *j = &w->jobs[i];

		FUZZ_ARENA_NAME_OK(j->name);
		FUZZ_CHECK(j->line >= 2 && (i == 0 || j->line > w->jobs[i - 1].line));
		FUZZ_CHECK(isfinite(j->submitted) && j->submitted >= 0);
		FUZZ_CHECK(j->round >= 0 &&
			   (i == 0 || j->round >= w->jobs[i - 1].round));
		FUZZ_CHECK(j->iters >= 1);
		FUZZ_CHECK(j->model >= 0 && (size_t)j->model < w->nmodels);
		FUZZ_CHECK(fuzz_arena_job_size(j->gpus));
		FUZZ_CHECK(j->type >= 0 && j->type < w->ntypes);
		/* The summary keys completion times by job id. */
		for (size_t k = 0; k < i; k++)
			FUZZ_CHECK(strcmp(w->jobs[k].name, j->name) != 0);
	}
	FUZZ_CHECK(isfinite(w->first_submit) && w->first_submit >= 0);
}

/*
 * Read the world; on rejection the error names one of its files (or the
 * directory itself), and a line of that file if any, and the world is left
 * empty; on acceptance it must
 * hold; either way freeing leaves nothing behind.
 */
static inline void fuzz_arena_read(void)
{
	const char *dir = fuzz_arena_dir();
	char err[SIM_ERR_LEN] = "";
	struct arena_world w;
	int rc;

	rc = arena_world_read(dir, &w, err, sizeof(err));
	if (rc != COPUS_OK) {
		FUZZ_CHECK(rc < 0 && strstr(err, dir) == err);
		/* A line an error names is a line of the file. */
		for (size_t i = 0; i < sizeof(fuzz_arena_files) /
					       sizeof(*fuzz_arena_files);
		     i++) {
			char path[600];

			snprintf(path, sizeof(path), "%s/%s", dir,
				 fuzz_arena_files[i]);
			FUZZ_CHECK(fuzz_error_line_ok(err, path,
						      fuzz_arena_lines()[i]));
		}
		FUZZ_CHECK(w.ntypes == 0 && w.db == NULL && w.models == NULL &&
			   w.jobs == NULL && w.njobs == 0);
		return;
	}
	fuzz_arena_check(&w);
	arena_world_free(&w);
}

#endif /* COPUS_FUZZ_ARENA_H */

/*
 * copus-plan's inputs: the planner's data directory (models.csv,
 * devices.json, comm.csv), measured iteration times in the format of
 * Arena's prof_database.json, cell names and query files.
 * Reader: copus-plan and its tests.
 *
 * Every reader fills err with a message that names the file, the line (or
 * the JSON key) and the field at fault, and returns a negative copus_status.
 */
#ifndef COPUS_SIM_PLAN_DATA_H
#define COPUS_SIM_PLAN_DATA_H

#include <stdbool.h>
#include <stddef.h>

#include <copus/planner.h>

#define PLAN_MAX_TYPES 16
#define PLAN_NAME_LEN 64

/* A model of models.csv, named "<family>_<size>". */
struct plan_model {
	char name[PLAN_NAME_LEN];
	copus_planner_desc desc;
	copus_planner_layer *layers;
	copus_planner_model model;
};

/* A GPU type and its planner constants. */
struct plan_gpu {
	char type[16];
	copus_planner_gpu gpu;
	/* Collectives measured in comm.csv (the others are borrowed). */
	int measured[COPUS_LINK_COUNT][COPUS_COLL_COUNT];
};

struct plan_data {
	struct plan_model *models;
	int n_models;
	struct plan_gpu gpus[PLAN_MAX_TYPES];
	int n_gpus;
};

/* One measured (or queried) iteration: model, batch, cell. */
struct plan_row {
	int model; /* index in plan_data.models */
	int batch;
	int gpu;   /* index in plan_data.gpus */
	copus_planner_cell cell;
	char cell_name[PLAN_NAME_LEN];
	double seconds; /* measured; -1 when no plan fits; 0 for a query */
	long line;      /* the query file's line */
};

/* Read models.csv, devices.json and comm.csv of dir. */
int plan_data_load(const char *dir, struct plan_data *d, char *err,
		   size_t errlen);
void plan_data_free(struct plan_data *d);

/* The model called name ("bert_2.6B" or Arena's "bert__2.6B"), or -1. */
int plan_model_find(const struct plan_data *d, const char *name);

/*
 * A cell name, "<nodes>_<type>_<nodes>_n_<gpus per node>_d": its GPU type
 * index and shape. COPUS_EPARSE when malformed, COPUS_EINVAL for a type
 * that devices.json does not list; err says which.
 */
int plan_cell_parse(const struct plan_data *d, const char *name, int *gpu,
		    copus_planner_cell *cell, char *err, size_t errlen);

/*
 * The measured times of a prof_database.json-format file:
 * {"optimal": {"<family>_<size>_<batch>": {"<cell>": seconds}}}, every
 * entry (seconds -1 for "no plan fits").
 */
int plan_prof_load(const char *path, const struct plan_data *d,
		   struct plan_row **rows, size_t *n, char *err,
		   size_t errlen);

/* A query file: header "model,batch,cell", one query a line. */
int plan_query_load(const char *path, const struct plan_data *d,
		    struct plan_row **rows, size_t *n, char *err,
		    size_t errlen);

/*
 * Crius's own estimates (crius-estimates.csv of the data directory): the
 * least total_s of each model x cell, matched against rows; *est[i] is the
 * estimate for rows[i], or -1 when there is none.
 */
int plan_crius_load(const char *path, const struct plan_data *d,
		    const struct plan_row *rows, size_t n, double *est,
		    char *err, size_t errlen);

/*
 * The GPU constants of d calibrated (copus_planner_calibrate) on the
 * measured times of rows (those with seconds > 0, and use[i] when use is
 * not NULL).
 */
int plan_calibrate(struct plan_data *d, const struct plan_row *rows, size_t n,
		   const bool *use, char *err, size_t errlen);

#endif /* COPUS_SIM_PLAN_DATA_H */

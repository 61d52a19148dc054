/*
 * How copus-plan's readers read (plan-data.c, the data directory and its
 * models and devices; plan-comm.c, its collectives; plan-measured.c,
 * measured times, queries and estimates; arena.c, Arena's world): the
 * bounds of what a file may say, plan-parse.c's readers of fields,
 * columns, GPU types and whole JSON files, and plan-comm.c's reader of
 * comm.csv. Private to sim: plan-parse.c calls nothing of the others, and
 * plan-comm.c nothing of plan-data.c.
 */
#ifndef COPUS_SIM_PLAN_READ_H
#define COPUS_SIM_PLAN_READ_H

#include <stddef.h>

#include <json-c/json.h>

#include "plan-data.h"
#include "sim.h"

/*
 * Bounds of what a device or a measured collective may say. Beyond them
 * the products and weighted sums of the fits leave the doubles (a peak of
 * 1e300 GFLOP/s is an infinite FLOP/s; a time of 1e-200 s an infinite
 * weight), and no real device or measurement comes near them.
 */
#define MAX_PEAK_GFLOPS 1e9    /* an exaFLOP/s */
#define MAX_MEMORY_MB 1e9      /* a petabyte */
#define MAX_BANDWIDTH_GB 1e9   /* an exabyte per second */
#define MIN_COMM_SECONDS 1e-9  /* a nanosecond */
#define MAX_COMM_SECONDS 1e6   /* eleven days */
#define MAX_COMM_ELEMENTS 1e15 /* several petabytes */

/* plan-parse.c */
/* A field as an integer in 1..1e9; err names file, line, field and value. */
int copus__plan_field_int(const struct csv *c, size_t row, int col, int *out,
			  char *err, size_t errlen);
/* The index of a named column in *col, or COPUS_EPARSE with err set. */
int copus__plan_col_of(const struct csv *c, const char *name, int *col,
		       char *err, size_t errlen);
/* The index of a GPU type in d, or -1. */
int copus__plan_gpu_find(const struct plan_data *d, const char *type);
/*
 * A whole JSON file (runtime/file.h's rules: at most 64 MiB, no NUL byte),
 * one value and white space; err names the file and the line of what is
 * wrong. Every JSON input of the simulator is read so.
 */
int copus__plan_read_json(const char *path, struct json_object **out,
			  char *err, size_t errlen);

/* plan-comm.c */
/* Read comm.csv into the communication constants of d's GPU types. */
int copus__plan_read_comm(const char *path, struct plan_data *d, char *err,
			  size_t errlen);

#endif /* COPUS_SIM_PLAN_READ_H */

/*
 * copus-trainer's --profile mode: a job whose truth is copus-sim's
 * (profile.c). For copus-trainer only.
 */
#ifndef COPUS_TRAINER_PROFILE_H
#define COPUS_TRAINER_PROFILE_H

#include <stddef.h>

struct trainer_profile;

/*
 * Load DIR/MODEL's tables for GPU type 'type' (placements-TYPE.csv, or the
 * untyped placements.csv of a one-type profile) into a new *out. -1 with err
 * set on failure.
 */
int trainer_profile_load(struct trainer_profile **out, const char *path,
			 const char *type, char *err, size_t len);
/* Frees p (NULL: nothing). */
void trainer_profile_free(struct trainer_profile *p);
/* The model's name. */
const char *trainer_profile_name(const struct trainer_profile *p);

/* The model's batch limits and the progress at which its job ends. */
void trainer_profile_limits(const struct trainer_profile *p,
			    double *init_batch, double *max_batch,
			    int *min_local, int *max_local, double *target);

/* A fixed total batch on 'replicas' GPUs as micro-batch and accumulation. */
void trainer_profile_split(const struct trainer_profile *p, double batch,
			   int replicas, int *local, int *accum);

/*
 * One step on 'gpus' GPUs over 'nodes' nodes, 'first' of them on the first
 * node: the compute time of its micro-batches (grad) and the time of the
 * rest (the gradient exchange).
 */
int trainer_profile_step(const struct trainer_profile *p, int nodes, int gpus,
			 int first, int local, int accum, double *grad,
			 double *rest);

/* Gradient |G|^2 and noise variance (at the initial batch) at 'progress'. */
void trainer_profile_grad(const struct trainer_profile *p, double batch,
			  double progress, double *sqr, double *var);

#endif /* COPUS_TRAINER_PROFILE_H */

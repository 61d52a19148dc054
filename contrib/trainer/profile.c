/*
 * copus-trainer --profile: a job that behaves as copus-sim's job of the same
 * model does. Its step and sync times come from the measured profile tables
 * of its GPU type (Pollux's trace layout), its gradient statistics from the
 * profile's validation runs at its batch and epoch, and its target is the
 * progress at which copus-sim ends the model's job. The simulator and the
 * trainer read the profiles with the same code (sim/trace.c), so a testbed
 * run on Slurm and copus-sim's run of the same workload differ only in what
 * Slurm, libcopus and the clock add.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../sim/sim.h"
#include "profile.h"

struct trainer_profile {
	struct app app;
};

int trainer_profile_load(struct trainer_profile **out, const char *path,
			 const char *type, char *err, size_t len)
{
	char dir[1024], file[1200];
	const char *name = strrchr(path, '/');
	const char *types[1];
	struct trainer_profile *p;

	*out = NULL;
	/* PATH is DIR/MODEL: the model's folder in a profiles directory. */
	if (name == NULL) {
		snprintf(dir, sizeof(dir), ".");
		name = path;
	} else {
		snprintf(dir, sizeof(dir), "%.*s", (int)(name - path), path);
		name++;
	}
	if (*name == '\0' || strlen(name) >= sizeof(p->app.name)) {
		snprintf(err, len, "--profile %s: not DIR/MODEL", path);
		return -1;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		snprintf(err, len, "--profile %s: out of memory", path);
		return -1;
	}
	/* A type with its own tables (placements-TYPE.csv), else the
	 * untyped tables of a one-type profile (placements.csv). */
	snprintf(file, sizeof(file), "%s/placements-%s.csv", path, type);
	types[0] = access(file, R_OK) == 0 ? type : "";
	if (sim_app_load(&p->app, dir, name, types, 1, err, len) != 0) {
		free(p);
		return -1;
	}
	if (p->app.max_epochs <= 0 || p->app.nv == 0) {
		snprintf(err, len, "--profile %s: no validation run to end at",
			 path);
		trainer_profile_free(p);
		return -1;
	}
	*out = p;
	return 0;
}

void trainer_profile_free(struct trainer_profile *p)
{
	if (p == NULL)
		return;
	sim_app_free(&p->app);
	free(p);
}

const char *trainer_profile_name(const struct trainer_profile *p)
{
	return p->app.name;
}

void trainer_profile_limits(const struct trainer_profile *p,
			    double *init_batch, double *max_batch,
			    int *min_local, int *max_local, double *target)
{
	*init_batch = p->app.init_batch;
	*max_batch = p->app.max_batch;
	*min_local = p->app.min_local;
	*max_local = p->app.max_local;
	*target = sim_app_progress(&p->app, p->app.max_epochs);
}

void trainer_profile_split(const struct trainer_profile *p, double batch,
			   int replicas, int *local, int *accum)
{
	sim_split_batch(&p->app, batch, replicas, local, accum);
}

int trainer_profile_step(const struct trainer_profile *p, int nodes, int gpus,
			 int first, int local, int accum, double *grad,
			 double *rest)
{
	int pl[64], nn = nodes < 64 ? nodes : 64;
	double step, sync;

	/*
	 * Slurm fills the nodes of a job that asks for a GPU count in order
	 * (6 GPUs on 2 nodes of 4: 4 + 2), and gives every node the same
	 * count where the job asks per node (sched/copus): each node holds
	 * the first node's count, the last one the rest. Where the first
	 * node's count cannot be that, the GPUs are spread evenly.
	 */
	if (first >= 1 && first * (nn - 1) < gpus && first * nn >= gpus) {
		for (int i = 0, left = gpus; i < nn; i++, left -= first)
			pl[i] = left < first ? left : first;
	} else {
		for (int i = 0; i < nn; i++)
			pl[i] = gpus / nn + (i < gpus % nn);
	}
	if (sim_app_throughput(&p->app, 0, pl, nn, local, &step, &sync) != 0)
		return -1;
	/* Every micro-batch computes; the gradients are exchanged once. */
	*grad = (step - sync) * (accum + 1);
	*rest = sync;
	return 0;
}

void trainer_profile_grad(const struct trainer_profile *p, double batch,
			  double progress, double *sqr, double *var)
{
	int epoch = 0;

	/* The epoch that progress is in, as copus-sim counts epochs. */
	while (epoch + 1 < p->app.max_epochs &&
	       sim_app_progress(&p->app, epoch + 1) <= progress)
		epoch++;
	sim_app_grad(&p->app, batch, epoch, sqr, var);
}

/*
 * libcopus's facade: the configuration, the allocation from the environment,
 * init and finalize, the step's clock, and the plan. A step's end hands its
 * times to measure.c, publishes a hint when one is due, and lets rescale.c
 * honour a rescale request; after a rescale checkpoint the process exits
 * here.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* The moving average of the gradient statistics forgets with this decay. */
#define DEFAULT_NOISE_DECAY 0.95
/* Steps after init (or a change of batch shape) not used for the fit. */
#define WARMUP_STEPS 2

static double _elapsed(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	       1e-9 * (double)(b->tv_nsec - a->tv_nsec);
}

/*
 * The sizes of a copus_config before the model, then the fingerprint, were
 * appended: a program built against those layouts keeps working, its newer
 * fields taken as zero (no model, no fingerprint).
 */
#define CONFIG_SIZE_NO_MODEL offsetof(copus_config, model)
#define CONFIG_SIZE_NO_FINGERPRINT offsetof(copus_config, fingerprint)

int copus_config_init(copus_config *cfg, size_t size)
{
	copus_config def = COPUS_CONFIG_INITIALIZER;

	if (cfg == NULL ||
	    (size != sizeof(copus_config) && size != CONFIG_SIZE_NO_MODEL &&
	     size != CONFIG_SIZE_NO_FINGERPRINT))
		return COPUS_EINVAL;
	def.size = size;
	memcpy(cfg, &def, size);
	return COPUS_OK;
}

/* The first of several variables that is set. */
static int _env_first(copus_ctx *ctx, const char *const *names, long lo,
		      long hi, int *out, bool *found)
{
	for (; *names != NULL; names++) {
		int rc =
			copus__env_foreign_int(ctx, *names, lo, hi, out, found);
		if (rc != COPUS_OK || *found)
			return rc;
	}
	return COPUS_OK;
}

/* Entries of a comma-separated device list. */
static int _count_list(const char *s)
{
	int n = 1;

	if (s == NULL || *s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		n += *s == ',';
	return n;
}

static int _read_env(copus_ctx *ctx)
{
	static const char *const rank_vars[] = { "RANK", "SLURM_PROCID", NULL };
	static const char *const world_vars[] = { "WORLD_SIZE", "SLURM_NTASKS",
						  NULL };
	static const char *const local_vars[] = { "LOCAL_RANK", "SLURM_LOCALID",
						  NULL };
	static const char *const node_vars[] = { "SLURM_JOB_NUM_NODES",
						 "SLURM_NNODES", NULL };
	copus_config *c = &ctx->cfg;
	copus_job_info *in = &ctx->info;
	bool found;
	int v, rc;
	const char *s;

	/* Slurm's job id; another resource manager's in COPUS_JOB_ID. */
	const char *id_vars[2][2] = {
		{ "SLURM_JOB_ID", getenv("SLURM_JOB_ID") },
		{ copus__env_name(COPUS__ENV_JOB_ID),
		  copus__env_text(COPUS__ENV_JOB_ID) },
	};
	in->job_id = 0;
	for (int i = 0; i < 2; i++) {
		const char *name = id_vars[i][0];
		char *end;
		unsigned long id;

		if ((s = id_vars[i][1]) == NULL || *s == '\0')
			continue;
		errno = 0;
		id = strtoul(s, &end, 10);
		if (errno != 0 || *end != '\0' || id == 0 || id > UINT32_MAX)
			return copus__fail(ctx, COPUS_EINVAL,
					   "environment variable %s=\"%.40s\" is not a job id",
					   name, s);
		in->job_id = (uint32_t)id;
		break;
	}
	in->restart_count = 0;
	rc = copus__env_foreign_int(ctx, "SLURM_RESTART_COUNT", 0,
				    COPUS_HINT_RESTART_MAX, &in->restart_count,
				    &found);
	if (rc != COPUS_OK)
		return rc;

	in->world = c->world;
	if (in->world < 0) {
		in->world = 1;
		if ((rc = _env_first(ctx, world_vars, 1, 1 << 24, &in->world,
				     &found)) != COPUS_OK)
			return rc;
	}
	in->rank = c->rank;
	if (in->rank < 0) {
		in->rank = 0;
		if ((rc = _env_first(ctx, rank_vars, 0, 1 << 24, &in->rank,
				     &found)) != COPUS_OK)
			return rc;
	}
	in->local_rank = c->local_rank;
	if (in->local_rank < 0) {
		in->local_rank = 0;
		if ((rc = _env_first(ctx, local_vars, 0, 1 << 24,
				     &in->local_rank, &found)) != COPUS_OK)
			return rc;
	}
	in->nodes = c->nodes;
	if (in->nodes < 0) {
		in->nodes = 1;
		if ((rc = _env_first(ctx, node_vars, 1, 1 << 24, &in->nodes,
				     &found)) != COPUS_OK)
			return rc;
	}
	in->gpus_per_node = c->gpus_per_node;
	if (in->gpus_per_node < 0) {
		in->gpus_per_node = 0;
		rc = copus__env_foreign_int(ctx, "SLURM_GPUS_ON_NODE", 0,
					    1 << 16, &v, &found);
		if (rc != COPUS_OK)
			return rc;
		if (found)
			in->gpus_per_node = v;
		else
			in->gpus_per_node =
				_count_list(getenv("CUDA_VISIBLE_DEVICES"));
	}
	if (in->rank >= in->world)
		return copus__fail(ctx, COPUS_EINVAL,
				   "rank %d is not below the world size %d",
				   in->rank, in->world);
	if (in->nodes > in->world)
		in->nodes = in->world;
	return COPUS_OK;
}

static int _check_config(copus_ctx *ctx, const copus_config *cfg)
{
	const copus_batch_limits *l = &cfg->limits;

	if (cfg->size != sizeof(copus_config) ||
	    cfg->magic != COPUS_CONFIG_MAGIC)
		return copus__fail(ctx, COPUS_EVERSION,
				   "config: size %zu or magic %#x do not match this libcopus (%zu, %#x); use COPUS_CONFIG_INITIALIZER",
				   cfg->size, cfg->magic, sizeof(copus_config),
				   COPUS_CONFIG_MAGIC);
	if (cfg->version != COPUS_API_VERSION)
		return copus__fail(ctx, COPUS_EVERSION,
				   "config: version %u, this libcopus has %d",
				   cfg->version, COPUS_API_VERSION);
	if (!isfinite(l->init_batch) || l->init_batch < 1 ||
	    l->init_batch > COPUS_HINT_BATCH_MAX)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: limits.init_batch %g is not in [1, %g]",
				   l->init_batch, COPUS_HINT_BATCH_MAX);
	if (!isfinite(l->max_batch) || l->max_batch < l->init_batch ||
	    l->max_batch > COPUS_HINT_BATCH_MAX)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: limits.max_batch %g is not in [init_batch %g, %g]",
				   l->max_batch, l->init_batch,
				   COPUS_HINT_BATCH_MAX);
	if (l->min_local < 1 || l->max_local < l->min_local ||
	    l->max_local > COPUS_HINT_LOCAL_MAX)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: limits.min_local %d, max_local %d are not 1 <= min <= max <= %d",
				   l->min_local, l->max_local,
				   COPUS_HINT_LOCAL_MAX);
	if (cfg->optimizer != COPUS_OPT_SGD && cfg->optimizer != COPUS_OPT_ADAM)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: optimizer %d is neither SGD nor Adam",
				   (int)cfg->optimizer);
	if (!isfinite(cfg->target_progress) || cfg->target_progress < 0)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: target_progress %g is negative",
				   cfg->target_progress);
	if (!isfinite(cfg->ckpt_interval))
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: ckpt_interval %g is not a number of seconds",
				   cfg->ckpt_interval);
	if (cfg->model != NULL && cfg->pipeline_degree == 0 &&
	    cfg->tensor_degree == 0) {
		if (cfg->n_layers != 0)
			return copus__fail(ctx, COPUS_EINVAL,
					   "config: n_layers %d with degrees the planner chooses: its stages are the model's layers",
					   cfg->n_layers);
	} else if (cfg->pipeline_degree < 1 || cfg->tensor_degree < 1) {
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: pipeline_degree %d and tensor_degree %d must be >= 1 (both 0, with a model: the planner chooses)",
				   cfg->pipeline_degree, cfg->tensor_degree);
	}
	if (cfg->model != NULL &&
	    copus__model_check(ctx, cfg->model) != COPUS_OK)
		return COPUS_EINVAL;
	if (cfg->n_layers < 0 ||
	    (cfg->n_layers > 0 && cfg->layer_costs == NULL))
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: n_layers %d without layer_costs",
				   cfg->n_layers);
	for (int i = 0; i < cfg->n_layers; i++)
		if (!isfinite(cfg->layer_costs[i]) || cfg->layer_costs[i] < 0)
			return copus__fail(ctx, COPUS_EINVAL,
					   "config: layer_costs[%d] = %g is not a finite cost >= 0",
					   i, cfg->layer_costs[i]);
	if (cfg->agree_interval < 1)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: agree_interval %d is below 1",
				   cfg->agree_interval);
	if (!isfinite(cfg->noise_decay) || cfg->noise_decay < 0 ||
	    cfg->noise_decay >= 1)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: noise_decay %g is not in [0, 1)",
				   cfg->noise_decay);
	if (!isfinite(cfg->hint_interval) || cfg->hint_interval < 0)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: hint_interval %g is negative",
				   cfg->hint_interval);
	if (cfg->exit_code < 0 || cfg->exit_code > 255)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: exit_code %d is not in [0, 255]",
				   cfg->exit_code);
	if (cfg->rescale_signal < 0 || cfg->rescale_signal >= NSIG)
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: rescale_signal %d is not a signal",
				   cfg->rescale_signal);
	if (cfg->gpu_type != NULL &&
	    (strlen(cfg->gpu_type) == 0 ||
	     strlen(cfg->gpu_type) >= COPUS_HINT_TYPE_LEN))
		return copus__fail(ctx, COPUS_EINVAL,
				   "config: gpu_type \"%.32s\" is not 1..%d characters",
				   cfg->gpu_type, COPUS_HINT_TYPE_LEN - 1);
	return COPUS_OK;
}

/*
 * GPU type names travel in hints: 1..15 characters of [A-Za-z0-9_.-]. Any
 * other name (from the config or COPUS_GPU_TYPE, named by what) is an
 * error, rather than a name the scheduler would not recognise.
 */
static int _set_gpu_type(copus_ctx *ctx, const char *t, const char *what)
{
	size_t n = t != NULL ? strlen(t) : 0;

	if (t == NULL || *t == '\0') {
		snprintf(ctx->gpu_type, sizeof(ctx->gpu_type), "default");
		return COPUS_OK;
	}
	for (size_t i = 0; i < n; i++) {
		char c = t[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-')) {
			n = sizeof(ctx->gpu_type);
			break;
		}
	}
	if (n >= sizeof(ctx->gpu_type))
		return copus__fail(ctx, COPUS_EINVAL,
				   "%s \"%.40s\" is not a GPU type name (1 to %zu characters of A-Z a-z 0-9 _ . -)",
				   what, t, sizeof(ctx->gpu_type) - 1);
	snprintf(ctx->gpu_type, sizeof(ctx->gpu_type), "%s", t);
	return COPUS_OK;
}

/*
 * The runtime's switches in the environment: COPUS_DEBUG (0, 1, 2),
 * COPUS_HINTS and COPUS_NO_PMIX (0 or 1). Any other value is an error that
 * names the variable, rather than a guess at what was meant.
 */
static int _switches(copus_ctx *ctx)
{
	int rc, v;

	if ((rc = copus__env_int(ctx, COPUS__ENV_DEBUG, &v)) != COPUS_OK)
		return rc;
	ctx->verbose = v;
	if ((rc = copus__env_int(ctx, COPUS__ENV_HINTS, &v)) != COPUS_OK)
		return rc;
	ctx->no_hints = v == 0;
	if ((rc = copus__env_int(ctx, COPUS__ENV_NO_PMIX, &v)) != COPUS_OK)
		return rc;
	ctx->no_pmix = v == 1;
	return COPUS_OK;
}

/* The rescale's parameters: the config's, else the environment's. */
static int _rescale_params(copus_ctx *ctx)
{
	int rc;

	ctx->exit_code = ctx->cfg.exit_code;
	if (ctx->exit_code == 0) {
		rc = copus__env_int(ctx, COPUS__ENV_REQUEUE_EXIT,
				    &ctx->exit_code);
		if (rc != COPUS_OK)
			return rc;
	}
	ctx->signals[0] = ctx->cfg.rescale_signal;
	if (ctx->signals[0] == 0) {
		rc = copus__env_int(ctx, COPUS__ENV_SIGNAL, &ctx->signals[0]);
		if (rc != COPUS_OK)
			return rc;
	}
	/* Slurm's requeue and preemption signal asks for a checkpoint too. */
	ctx->signals[1] = SIGTERM;
	ctx->ckpt_interval = ctx->cfg.ckpt_interval;
	if (ctx->ckpt_interval == 0) {
		rc = copus__env_seconds(ctx, COPUS__ENV_CKPT_INTERVAL,
					&ctx->ckpt_interval);
		if (rc != COPUS_OK)
			return rc;
	}
	if (ctx->ckpt_interval < 0)
		ctx->ckpt_interval = 0;
	if (ctx->ckpt_interval > 0 && ctx->ckpt_dir == NULL) {
		copus__log(ctx, 0,
			   "no checkpoint directory: no periodic checkpoints every %g s",
			   ctx->ckpt_interval);
		ctx->ckpt_interval = 0;
	}
	return COPUS_OK;
}

int copus_init(const copus_config *cfg, copus_ctx **out)
{
	copus_config full;
	copus_ctx *ctx = NULL;
	int rc;

	if (out != NULL)
		*out = NULL;
	if (cfg == NULL || out == NULL) {
		copus__log(NULL, 0, "copus_init: NULL argument");
		return COPUS_EINVAL;
	}
	/* An older layout: read no further than its end. */
	if ((cfg->size == CONFIG_SIZE_NO_MODEL ||
	     cfg->size == CONFIG_SIZE_NO_FINGERPRINT) &&
	    cfg->magic == COPUS_CONFIG_MAGIC) {
		memset(&full, 0, sizeof(full));
		memcpy(&full, cfg, cfg->size);
		full.size = sizeof(full);
		cfg = &full;
	}
	ctx = calloc(1, sizeof(*ctx));
	if (ctx == NULL) {
		copus__init_failed(NULL, COPUS_ENOMEM);
		return COPUS_ENOMEM;
	}
	ctx->info.rank = -1;
	/* Checked later (_switches); logs the checks before it already. */
	ctx->verbose = atoi(copus__env_text(COPUS__ENV_DEBUG));
	rc = _check_config(ctx, cfg);
	if (rc != COPUS_OK)
		goto fail;
	ctx->cfg = *cfg;
	/* The caller's strings, arrays and model may go away after init. */
	if (cfg->model != NULL) {
		ctx->model = *cfg->model;
		ctx->has_model = true;
	}
	ctx->cfg.model = NULL;
	rc = copus__ckpt_setup(ctx, cfg);
	if (rc != COPUS_OK)
		goto fail;
	if (cfg->n_layers > 0) {
		ctx->layer_costs =
			malloc(sizeof(double) * (size_t)cfg->n_layers);
		if (ctx->layer_costs == NULL) {
			rc = COPUS_ENOMEM;
			goto fail;
		}
		memcpy(ctx->layer_costs, cfg->layer_costs,
		       sizeof(double) * (size_t)cfg->n_layers);
	}
	ctx->cfg.layer_costs = ctx->layer_costs;
	rc = cfg->gpu_type != NULL
		     ? _set_gpu_type(ctx, cfg->gpu_type, "config: gpu_type")
		     : _set_gpu_type(ctx, copus__env_text(COPUS__ENV_GPU_TYPE),
				     "environment variable COPUS_GPU_TYPE");
	if (rc != COPUS_OK)
		goto fail;
	ctx->cfg.gpu_type = ctx->gpu_type;
	if (ctx->cfg.noise_decay == 0)
		ctx->cfg.noise_decay = DEFAULT_NOISE_DECAY;

	rc = _read_env(ctx);
	if (rc == COPUS_OK)
		rc = _switches(ctx);
	if (rc != COPUS_OK)
		goto fail;
	if (ctx->has_model && cfg->pipeline_degree == 0) {
		rc = copus__plan_model(ctx);
		if (rc != COPUS_OK)
			goto fail;
	} else if (copus_plan_degrees_of_world(ctx->info.world,
					       cfg->pipeline_degree,
					       cfg->tensor_degree,
					       &ctx->degrees) != COPUS_OK) {
		rc = copus__fail(ctx, COPUS_EINVAL,
				 "world size %d is not a multiple of pipeline_degree %d x tensor_degree %d",
				 ctx->info.world, cfg->pipeline_degree,
				 cfg->tensor_degree);
		goto fail;
	}
	if (ctx->info.world > 1 && cfg->agree == NULL) {
		rc = copus__fail(ctx, COPUS_EINVAL,
				 "config: %d ranks need an agree callback to honour rescale requests together",
				 ctx->info.world);
		goto fail;
	}
	rc = _rescale_params(ctx);
	if (rc != COPUS_OK)
		goto fail;
	copus_noise_init(&ctx->noise, ctx->cfg.noise_decay);
	ctx->skip_obs = WARMUP_STEPS;
	ctx->state = COPUS_STATE_RUNNING;
	ctx->ckpt_step = -1;
	ctx->prev_sqr = -1;
	ctx->last_hint = -1.0;
	ctx->last_ckpt = copus__now();

	rc = copus__ckpt_dir_check(ctx);
	if (rc == COPUS_OK)
		rc = copus__restore(ctx);
	if (rc == COPUS_OK) {
		/*
		 * The plan's first inputs: the restored ones, which every
		 * rank read from the same manifest.
		 */
		ctx->plan_grad = copus__grad(ctx);
		if (ctx->n_obs > 0 && copus__fit(ctx) == COPUS_OK &&
		    copus__perf_of_type(ctx) != NULL) {
			ctx->plan_perf = *copus__perf_of_type(ctx);
			ctx->plan_have_perf = true;
		}
		ctx->last_refit = copus__now();
		rc = copus__publisher_start(ctx);
	}
	if (rc == COPUS_OK && !cfg->no_signal_handler)
		rc = copus__signals_install(ctx);
	/*
	 * The ranks start together or not at all: a rank that could not
	 * restore its state (its file is corrupt, its load failed) stops
	 * every rank here, before any of them trains.
	 */
	if (ctx->info.world > 1) {
		/*
		 * With planned degrees, the maxima of the plan's numbers and
		 * of their negations: every rank sees whether all computed
		 * the same plan.
		 */
		const copus_planner_plan *p = &ctx->plan;
		int64_t v[9] = { rc != COPUS_OK,       p->degrees.data,
				 -p->degrees.data,     p->degrees.tensor,
				 -p->degrees.tensor,   p->degrees.pipeline,
				 -p->degrees.pipeline, p->micro_batches,
				 -p->micro_batches };
		int arc = copus__agree(ctx, v, ctx->planned ? 9 : 1);

		if (rc == COPUS_OK && arc != COPUS_OK)
			rc = arc;
		else if (rc == COPUS_OK && v[0] != 0)
			rc = copus__fail(ctx, COPUS_ESTATE,
					 "another rank of the job failed to start (see its log); no rank trains");
		else if (rc == COPUS_OK && ctx->planned &&
			 (v[1] != -v[2] || v[3] != -v[4] || v[5] != -v[6] ||
			  v[7] != -v[8]))
			rc = copus__fail(ctx, COPUS_ESTATE,
					 "the ranks planned the model differently (data %lld..%lld, tensor %lld..%lld, pipeline %lld..%lld): give every node the same COPUS_GPU_TYPE and COPUS_PLANNER_GPUS",
					 (long long)-v[2], (long long)v[1],
					 (long long)-v[4], (long long)v[3],
					 (long long)-v[6], (long long)v[5]);
	}
	if (rc != COPUS_OK)
		goto fail;
	copus__plan_log(ctx);
	copus__resume_log(ctx);
	copus__log(ctx, 1,
		   "job %u restart %d: rank %d of %d on %d nodes, %d GPUs per node (%s), step %lld",
		   ctx->info.job_id, ctx->info.restart_count, ctx->info.rank,
		   ctx->info.world, ctx->info.nodes, ctx->info.gpus_per_node,
		   ctx->gpu_type, (long long)ctx->info.step);
	*out = ctx;
	return COPUS_OK;
fail:
	if (ctx->info.rank < 0)
		ctx->info.rank = 0;
	/* An error without a message of its own (out of memory) says what
	 * it is. */
	if (ctx->err[0] == '\0')
		copus__fail(ctx, rc, "%s", copus_strerror(rc));
	copus__log(ctx, 0, "init failed: %s", copus_errmsg(ctx));
	copus__init_failed(ctx, rc);
	copus__publisher_stop(ctx);
	copus__signals_restore(ctx);
	copus__ckpt_free(ctx);
	free(ctx->layer_costs);
	free(ctx);
	return rc;
}

int copus_finalize(copus_ctx *ctx)
{
	if (ctx == NULL)
		return COPUS_EINVAL;
	copus__publisher_stop(ctx);
	copus__signals_restore(ctx);
	copus__ckpt_free(ctx);
	free(ctx->layer_costs);
	free(ctx);
	return COPUS_OK;
}

int copus_info(const copus_ctx *ctx, copus_job_info *out)
{
	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	*out = ctx->info;
	return COPUS_OK;
}

int copus_step_begin(copus_ctx *ctx)
{
	if (ctx == NULL)
		return COPUS_EINVAL;
	if (ctx->state == COPUS_STATE_CHECKPOINTED)
		return copus__fail(ctx, COPUS_ESTATE,
				   "step_begin after the rescale checkpoint: the process should exit");
	clock_gettime(CLOCK_MONOTONIC, &ctx->t_begin);
	ctx->in_step = true;
	ctx->in_sync = false;
	ctx->sync_time = 0.0;
	ctx->local_sum = 0.0;
	ctx->local_count = 0;
	ctx->have_total = false;
	ctx->have_dot = false;
	return COPUS_OK;
}

int copus_sync_begin(copus_ctx *ctx)
{
	if (ctx == NULL)
		return COPUS_EINVAL;
	if (!ctx->in_step || ctx->in_sync)
		return copus__fail(ctx, COPUS_ESTATE,
				   "sync_begin outside a step or inside a sync");
	clock_gettime(CLOCK_MONOTONIC, &ctx->t_sync);
	ctx->in_sync = true;
	return COPUS_OK;
}

int copus_sync_end(copus_ctx *ctx)
{
	struct timespec now;

	if (ctx == NULL)
		return COPUS_EINVAL;
	if (!ctx->in_sync)
		return copus__fail(ctx, COPUS_ESTATE,
				   "sync_end without sync_begin");
	clock_gettime(CLOCK_MONOTONIC, &now);
	ctx->sync_time += _elapsed(&ctx->t_sync, &now);
	ctx->in_sync = false;
	return COPUS_OK;
}

static double _lr_gain(const copus_ctx *ctx, const copus_grad_stats *g,
		       double batch)
{
	double gain = 1.0;

	if (copus_gain(g, ctx->cfg.limits.init_batch, batch, &gain) != COPUS_OK)
		return 1.0;
	return ctx->cfg.optimizer == COPUS_OPT_ADAM ? sqrt(gain) : gain;
}

/*
 * Whether a "running" hint is due: the run's first, one an interval after
 * the last, or the run's first with a model of its own placement (hint.h,
 * "Rate"), tried from COPUS_HINT_FIRST_MODEL s after the last hint on, once
 * that placement has been measured: a run restored on other GPUs than its
 * model knows tells the scheduler how it does on them within seconds.
 */
static bool _hint_due(copus_ctx *ctx)
{
	double since = copus__now() - ctx->last_hint;
	int rc;

	if (ctx->last_hint < 0 || since >= ctx->hint_interval)
		return true;
	if (ctx->hint_modelled || since < COPUS_HINT_FIRST_MODEL ||
	    !copus__placement_measured(ctx))
		return false;
	rc = copus__fit(ctx);
	if (rc != COPUS_OK && rc != COPUS_ENODATA)
		ctx->hint_modelled = true; /* logged; the interval rules */
	return rc == COPUS_OK && copus__perf_of_type(ctx) != NULL;
}

int copus_step_end(copus_ctx *ctx, int local, int accum_steps)
{
	struct timespec now;
	double step, compute;
	bool checkpointed;
	int rc, code;

	if (ctx == NULL)
		return COPUS_EINVAL;
	if (!ctx->in_step)
		return copus__fail(ctx, COPUS_ESTATE,
				   "step_end without step_begin");
	if (local < 1 || local > COPUS_HINT_LOCAL_MAX || accum_steps < 0 ||
	    accum_steps > COPUS_HINT_LOCAL_MAX)
		return copus__fail(ctx, COPUS_EINVAL,
				   "step_end: micro-batch %d or accumulation steps %d out of range",
				   local, accum_steps);
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (ctx->in_sync) {
		ctx->sync_time += _elapsed(&ctx->t_sync, &now);
		ctx->in_sync = false;
	}
	ctx->in_step = false;
	step = _elapsed(&ctx->t_begin, &now);
	compute = step - ctx->sync_time;
	if (compute < 0)
		compute = 0;

	copus__measure_step(ctx, local, accum_steps, step, compute);

	if (ctx->info.rank == 0 && ctx->pub != NULL && ctx->hint_interval > 0 &&
	    _hint_due(ctx)) {
		/*
		 * A failed hint is logged, never fatal to the training, and
		 * not retried before the next interval.
		 */
		ctx->last_hint = copus__now();
		copus__fit(ctx);
		if (copus__perf_of_type(ctx) != NULL &&
		    copus__placement_measured(ctx))
			ctx->hint_modelled = true;
		copus__publish_hint(ctx, COPUS_STATE_RUNNING, false);
	}

	rc = copus__step_boundary(ctx, &checkpointed);
	if (rc != COPUS_OK || !checkpointed || !ctx->cfg.exit_on_rescale)
		return rc;
	/* The checkpoint is durable and the scheduler was told: requeue. */
	code = ctx->exit_code;
	copus__log(ctx, 1, "exiting with %d for the requeue", code);
	copus_finalize(ctx);
	fflush(NULL);
	exit(code);
}

int copus_plan_get(copus_ctx *ctx, copus_plan *out)
{
	const copus_batch_limits *l;
	const copus_perf_params *p;
	copus_plan_coords at;
	copus_model m;
	copus_batch_plan bp;
	int nodes, rc;

	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	memset(out, 0, sizeof(*out));
	l = &ctx->cfg.limits;
	rc = copus__coords(ctx, ctx->info.rank, &at);
	if (rc != COPUS_OK)
		return rc;
	out->data_degree = ctx->degrees.data;
	out->pipeline_degree = ctx->degrees.pipeline;
	out->tensor_degree = ctx->degrees.tensor;
	out->tensor_rank = at.tensor_rank;
	out->pipeline_rank = at.pipeline_rank;
	out->data_rank = at.data_rank;
	if (ctx->cfg.n_layers > 0)
		copus__stage_layers(ctx, ctx->degrees.pipeline,
				    out->pipeline_rank, &out->first_layer,
				    &out->n_layers);

	if (ctx->info.world > 1) {
		/* The inputs every rank agreed on: the same plan everywhere. */
		p = ctx->plan_have_perf ? &ctx->plan_perf : NULL;
		m.grad = ctx->plan_grad;
	} else {
		copus__fit(ctx);
		p = copus__perf_of_type(ctx);
		m.grad = copus__grad(ctx);
	}
	if (p == NULL && ctx->cfg.prior.alpha_c > 0)
		p = &ctx->cfg.prior;
	m.limits = *l;
	nodes = ctx->info.nodes < ctx->degrees.data ? ctx->info.nodes
						    : ctx->degrees.data;
	if (p != NULL) {
		m.perf = *p;
		rc = copus_best_batch(&m, nodes, ctx->degrees.data, &bp);
		if (rc == COPUS_OK) {
			out->batch = bp.batch;
			out->local = bp.local;
			out->accum_steps = bp.accum_steps;
			out->efficiency = bp.efficiency;
			out->throughput = bp.throughput;
			out->goodput = bp.goodput;
			out->lr_gain = _lr_gain(ctx, &m.grad, bp.batch);
			return COPUS_OK;
		}
	}
	/*
	 * No model yet (or no batch fits it): the batch the job was tuned for,
	 * split over the replicas, accumulating when a micro-batch would not
	 * fit one GPU.
	 */
	{
		double per = ceil(l->init_batch / ctx->degrees.data);
		int accum = 0;

		if (per > l->max_local) {
			if (!l->accumulation)
				return copus__fail(ctx, COPUS_ERANGE,
						   "batch %g over %d replicas needs micro-batches of %g > max_local %d and accumulation is off",
						   l->init_batch,
						   ctx->degrees.data, per,
						   l->max_local);
			accum = (int)ceil(per / l->max_local) - 1;
			per = ceil(l->init_batch /
				   ((double)ctx->degrees.data * (accum + 1)));
		}
		if (per < l->min_local)
			per = l->min_local;
		out->local = (int)per;
		out->accum_steps = accum;
		out->batch =
			(double)ctx->degrees.data * out->local * (accum + 1);
		copus_efficiency(&m.grad, l->init_batch, out->batch,
				 &out->efficiency);
		out->lr_gain = _lr_gain(ctx, &m.grad, out->batch);
	}
	return COPUS_OK;
}

int copus_state(const copus_ctx *ctx, copus_job_state *out)
{
	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	*out = ctx->state;
	return COPUS_OK;
}

int copus_exit_code(const copus_ctx *ctx, int *out)
{
	if (ctx == NULL || out == NULL)
		return COPUS_EINVAL;
	*out = ctx->exit_code;
	return COPUS_OK;
}

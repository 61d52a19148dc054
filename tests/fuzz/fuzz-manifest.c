/*
 * Fuzz target: copus__parse_manifest() (runtime/checkpoint-format.c), the
 * checkpoint manifest a restarted job reads from its checkpoint directory,
 * a file a crash, a full disk or another program may have left in any
 * state. An accepted manifest must name files inside the directory, one per
 * rank or one in all, and give the runtime a state it can go on from. A
 * manifest of version 4 is refused unless its checksum matches: the seeds
 * named valid-v4-* carry theirs.
 */
#include <math.h>

#include "internal.h"

#include "fuzz.h"

static void check_manifest(const copus_ctx *ctx,
			   const struct copus__manifest *m)
{
	FUZZ_CHECK(m->step >= 0 && m->step <= COPUS_HINT_STEP_MAX);
	FUZZ_CHECK(m->world >= 1 && m->world <= 1 << 20);
	/* A layout of the world; every rank's file, or a shard's each. */
	FUZZ_CHECK(m->layout.data >= 1 && m->layout.pipeline >= 1 &&
		   m->layout.tensor >= 1);
	FUZZ_CHECK((long long)m->layout.data * m->layout.pipeline *
			   m->layout.tensor == m->world);
	FUZZ_CHECK(m->nfiles == 0 ||
		   m->nfiles == (m->all_ranks ? m->world
					      : m->layout.pipeline *
							m->layout.tensor));
	FUZZ_CHECK(m->n_layers >= 0);
	/* Version 4's: recorded or -1 (NULL), and printable. */
	FUZZ_CHECK(m->data_inner >= -1 && m->data_inner <= 1);
	FUZZ_CHECK(m->written >= -1 && m->job >= -1 && m->restart >= -1);
	FUZZ_CHECK(m->fingerprint == NULL ||
		   copus__fingerprint_ok(m->fingerprint,
					 strlen(m->fingerprint)));
	FUZZ_CHECK(m->nfiles >= 0);
	for (int i = 0; i < m->nfiles; i++) {
		const char *f = m->files[i];

		/* Never a path out of the checkpoint directory. */
		FUZZ_CHECK(f != NULL && strchr(f, '/') == NULL && f[0] != '.');
		FUZZ_CHECK(strlen(f) <= 200);
		FUZZ_CHECK(m->sizes[i] >= 0);
		FUZZ_CHECK(m->crcs[i] >= -1 && m->crcs[i] <= 4294967295LL);
	}
	FUZZ_CHECK(ctx->n_obs >= 0 && ctx->n_obs <= COPUS_MAX_OBS);
	for (int i = 0; i < ctx->n_obs; i++) {
		const struct copus__obs *ob = &ctx->obs[i];

		FUZZ_CHECK(memchr(ob->type, '\0', sizeof(ob->type)) != NULL);
		FUZZ_CHECK(ob->nodes >= 1 && ob->replicas >= ob->nodes);
		FUZZ_CHECK(ob->local >= 1 && ob->accum_steps >= 0);
		FUZZ_CHECK(ob->sum_compute >= 0 && isfinite(ob->sum_compute));
		FUZZ_CHECK(ob->sum_step >= 0 && isfinite(ob->sum_step));
		FUZZ_CHECK(ob->n >= 0);
	}
	FUZZ_CHECK(isfinite(ctx->noise.sqr) && isfinite(ctx->noise.var));
	FUZZ_CHECK(ctx->noise.bias >= 0 && ctx->noise.bias <= 1);
	FUZZ_CHECK(ctx->noise.count >= 0);
	FUZZ_CHECK(isfinite(ctx->info.progress) && ctx->info.progress >= 0);
	FUZZ_CHECK(ctx->info.samples >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_text(data, size);
	copus_ctx *ctx = calloc(1, sizeof(*ctx));
	struct copus__manifest m;
	int rc;

	FUZZ_CHECK(ctx != NULL);
	ctx->info.world = 1;
	rc = copus__parse_manifest(ctx, "fuzz/copus.manifest", text, &m);
	if (rc == COPUS_OK) {
		check_manifest(ctx, &m);
		copus__manifest_free(&m);
	} else {
		/* Refused: the error names the field; nothing is left to free. */
		FUZZ_CHECK(rc == COPUS_EPARSE && ctx->err[0] != '\0');
		FUZZ_CHECK(m.files == NULL && m.nfiles == 0);
	}
	free(ctx);
	free(text);
	return 0;
}

/*
 * What a round knows of its jobs beyond their hints (round-models.c): the
 * GPU types' speeds, the jobs' models estimated on the types they have not
 * run on, and the predictor's remaining times. Private to the round:
 * round.c takes the speeds first, round-input.c the rest once the policy's
 * input is built; round-models.c calls nothing of round.c.
 */
#ifndef COPUS_PLUGIN_ROUND_MODELS_H
#define COPUS_PLUGIN_ROUND_MODELS_H

#include "round.h"

struct copus__sched;

/* Each GPU type's speed from its constants, into r->speeds. */
void copus__round_speeds(const struct copus__sched *s, struct copus__round *r);
/*
 * Completes each input job's models with estimates on the types its hint does
 * not name (r->est_models, r->estimated), from its models on the others, the
 * round's jobs and the types' constants (r->speeds); what the jobs show of the
 * types' ratios stays in s for later rounds.
 */
void copus__round_estimate(struct copus__sched *s, struct copus__round *r);
/*
 * Sets the remaining time of each input job whose hint gives none from the
 * predictor; r->predict_rc says why it gave nothing.
 */
void copus__round_predict(struct copus__sched *s, struct copus__round *r);

#endif /* COPUS_PLUGIN_ROUND_MODELS_H */

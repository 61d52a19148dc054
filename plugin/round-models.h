/*
 * What a round knows of its jobs beyond their hints (round-models.c):
 * their models estimated on the GPU types they have not run on, and the
 * predictor's remaining times. Private to round.c, which calls them once
 * the policy's input is built; round-models.c calls nothing of round.c.
 */
#ifndef COPUS_PLUGIN_ROUND_MODELS_H
#define COPUS_PLUGIN_ROUND_MODELS_H

#include "round.h"

struct copus__sched;

/*
 * Completes each input job's models with estimates on the types its hint
 * does not name (r->est_models, r->estimated), from its models on the
 * others, the round's jobs and the types' constants; what the jobs show of
 * the types' ratios stays in s for later rounds.
 */
void copus__round_estimate(struct copus__sched *s, struct copus__round *r);
/*
 * Sets the remaining time of each input job whose hint gives none from the
 * predictor; r->predict_rc says why it gave nothing.
 */
void copus__round_predict(struct copus__sched *s, struct copus__round *r);

#endif /* COPUS_PLUGIN_ROUND_MODELS_H */

/*
 * The config.h that Slurm's internal headers include (-DHAVE_CONFIG_H) when
 * sched/copus is built out of tree: only NDEBUG, so that the headers do not
 * reference lock-checking functions that a release slurmctld lacks.
 */
#define NDEBUG 1

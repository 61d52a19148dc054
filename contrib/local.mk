# Build rules of contrib/ (included by the top-level Makefile.am).

# ---------------------------------------------------------------------------
# copus-trainer: a training-job stand-in for the demo and the Slurm tests
# ---------------------------------------------------------------------------
bin_PROGRAMS += contrib/trainer/copus-trainer
contrib_trainer_copus_trainer_SOURCES = contrib/trainer/copus-trainer.c
contrib_trainer_copus_trainer_LDADD = runtime/libcopus.la \
	core/libcopus-core.la -lm
TESTS += tests/test-trainer.sh
EXTRA_DIST += tests/test-trainer.sh

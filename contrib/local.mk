# Build rules of contrib/ (included by the top-level Makefile.am).

# ---------------------------------------------------------------------------
# copus-trainer: a training-job stand-in for the demo and the Slurm tests
# ---------------------------------------------------------------------------
bin_PROGRAMS += contrib/trainer/copus-trainer
contrib_trainer_copus_trainer_SOURCES = contrib/trainer/copus-trainer.c \
	contrib/trainer/profile.c contrib/trainer/profile.h
contrib_trainer_copus_trainer_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS)
contrib_trainer_copus_trainer_LDADD = sim/libsim.la runtime/libcopus.la \
	core/libcopus-core.la $(JSONC_LIBS) -lm
TESTS += tests/test-trainer.sh tests/test-testbed.sh
EXTRA_DIST += tests/test-trainer.sh tests/test-testbed.sh \
	contrib/testbed.sh contrib/testbed.py
dist_man_MANS += etc/copus-trainer.1

# ---------------------------------------------------------------------------
# The demo from the installed files: copus-demo runs slurm-demo.sh --installed
# from $(pkgdatadir), beside loopback-cluster.sh, with the plugins in Slurm's
# plugin directory and the programs in $(bindir) that this build installs.
# ---------------------------------------------------------------------------
pkgdata_SCRIPTS = contrib/slurm-demo.sh contrib/loopback-cluster.sh
bin_SCRIPTS = contrib/copus-demo
CLEANFILES += contrib/copus-demo
EXTRA_DIST += contrib/copus-demo.in
dist_man_MANS += etc/copus-demo.1
# The installation directories, as make expands them (configure leaves
# ${libdir} and the like unexpanded).
contrib/copus-demo: $(srcdir)/contrib/copus-demo.in Makefile
	$(AM_V_GEN)$(MKDIR_P) contrib && sed \
		-e 's|@pkgdatadir[@]|$(pkgdatadir)|g' \
		-e 's|@slurmplugindir[@]|$(slurmplugindir)|g' \
		-e 's|@bindir[@]|$(bindir)|g' \
		$(srcdir)/contrib/copus-demo.in >$@.tmp && \
	chmod +x $@.tmp && mv $@.tmp $@

# The check of a machine with a GPU: libcopus's CUDA build from the
# tarball, its GPU tests, the adapter's step time against CUDA events. Here
# it runs as far as a machine without a GPU lets it.
EXTRA_DIST += contrib/gpu-check.sh contrib/gpu-check.py tests/test-gpu-check.sh
TESTS += tests/test-gpu-check.sh

# The PyTorch adapter, where Debian's python3 imports modules from (under
# the prefix: /usr/lib/python3/dist-packages for --prefix=/usr).
copuspythondir = $(prefix)/lib/python3/dist-packages
copuspython_DATA = contrib/pytorch/copus_torch.py contrib/pytorch/copus_tensor.py \
	contrib/pytorch/copus_lib.py contrib/pytorch/copus_pipeline.py \
	contrib/pytorch/copus_merge.py contrib/pytorch/copus_launch.py

# copus-torch-merge: the adapter's checkpoint as one state_dict
# (copus_merge.main), with the directory of the modules above on Python's
# path.
bin_SCRIPTS += contrib/copus-torch-merge
CLEANFILES += contrib/copus-torch-merge
EXTRA_DIST += contrib/copus-torch-merge.in
dist_man_MANS += etc/copus-torch-merge.1
contrib/copus-torch-merge: $(srcdir)/contrib/copus-torch-merge.in Makefile
	$(AM_V_GEN)$(MKDIR_P) contrib && sed \
		-e 's|@copuspythondir[@]|$(copuspythondir)|g' \
		$(srcdir)/contrib/copus-torch-merge.in >$@.tmp && \
	chmod +x $@.tmp && mv $@.tmp $@

# copus-torchrun: N processes of a PyTorch script on this machine
# (copus_launch.launch), as torchrun starts them.
bin_SCRIPTS += contrib/copus-torchrun
CLEANFILES += contrib/copus-torchrun
EXTRA_DIST += contrib/copus-torchrun.in
dist_man_MANS += etc/copus-torchrun.1
contrib/copus-torchrun: $(srcdir)/contrib/copus-torchrun.in Makefile
	$(AM_V_GEN)$(MKDIR_P) contrib && sed \
		-e 's|@copuspythondir[@]|$(copuspythondir)|g' \
		$(srcdir)/contrib/copus-torchrun.in >$@.tmp && \
	chmod +x $@.tmp && mv $@.tmp $@

# The adapter's tutorial, and its examples, runnable as installed (lm.py
# beside the scripts that import it).
dist_man_MANS += etc/copus-pytorch.7
copuspytorchexamplesdir = $(docdir)/examples/pytorch
dist_copuspytorchexamples_DATA = etc/pytorch/lm.py etc/pytorch/train_plain.py \
	etc/pytorch/train_dp.py etc/pytorch/train_tp.py etc/pytorch/train_pp.py \
	etc/pytorch/train.sbatch

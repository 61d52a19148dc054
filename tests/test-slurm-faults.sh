#!/bin/bash
# The quick part of the fault matrix (tests/bench-faults.sh, which runs
# every step of a job's life x every fault): a slurmctld crash at the
# elastic job's first start and at its rescale request, its node's slurmd
# killed as it exits 75, its node drained once its checkpoint is written,
# its training killed while it runs after a restart, and a slurmctld crash
# as it ends. Each job must run to completion exactly once (the killed one
# end FAILED once; a job whose end slurmctld had not saved is found missing
# from its node and runs again, never left running as a ghost), no run
# overlap another, no GPU be held twice, no checkpoint be lost, and
# copus_state agree with Slurm.
#
# COPUS_CHAOS=0 in the environment skips it (a machine too loaded for a
# loopback cluster's timings), as it does the chaos soak.
[ "${COPUS_CHAOS:-1}" != 0 ] || {
	echo "SKIP: COPUS_CHAOS=0"
	exit 77
}
exec bash "$(dirname "$0")/bench-faults.sh" \
	--cells first-start:ctld,asked:ctld,exited-75:slurmd,checkpointed:drain,restarted:kill,finished:ctld

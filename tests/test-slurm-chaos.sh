#!/bin/bash
# The short chaos soak (tests/chaos.sh, 60 s, each kind of fault in turn):
# no job lost, none run twice at once, no GPU held twice, no checkpoint lost
# or corrupted, slurmctld and the plugin's state sound after every recovery.
# tests/chaos.sh 600 is the ten-minute version.
#
# COPUS_CHAOS=0 in the environment skips it (a machine too loaded for a
# loopback cluster's timings).
[ "${COPUS_CHAOS:-1}" != 0 ] || {
	echo "SKIP: COPUS_CHAOS=0"
	exit 77
}
CHAOS_CYCLE=1 exec bash "$(dirname "$0")/chaos.sh" 60 1

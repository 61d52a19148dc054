#!/bin/bash
# The short chaos soak (tests/chaos.sh, 60 s, each kind of fault in turn):
# no job lost, none run twice at once, no GPU held twice, no checkpoint lost
# or corrupted, slurmctld and the plugin's state sound after every recovery.
# tests/chaos.sh 600 is the ten-minute version.
CHAOS_CYCLE=1 exec bash "$(dirname "$0")/chaos.sh" 60 1

# shellcheck shell=bash
# The fault campaign's short part (scripts/fault-campaign runs the long one):
# one trial of each fault that tests/cluster/test_train.sh does not inject
# already, at a moment drawn from a fixed seed (tests/fault/campaign.sh). A
# trial passes when the job restores a committed version bit-exact, the
# newest one committed (or the one before it when the fault destroyed the
# newest), after an error naming the cause where the fault stops the job.
# About 30 s a trial on an idle machine.

export FAULT_WORK=$BATON_TEST_RESULTS/cluster-fault
. "$REPO/tests/fault/campaign.sh"

fault_trial() { FAULT_KIND=$1 trial "$2"; }

test_full_checkpoint_file_system() { fault_trial fs-full 1; }
test_read_only_checkpoint_directory() { fault_trial read-only 2; }
test_flipped_bit_in_the_newest_version() { fault_trial bitflip 3; }
test_truncated_shard_in_the_newest_version() { fault_trial truncate 4; }
test_unsynced_writes_of_a_killed_rank_dropped() { fault_trial drop-unsynced 5; }

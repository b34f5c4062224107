# shellcheck shell=bash
# Checkpoints on the local cluster: eight ranks over four nodes save in a
# loop and are killed with SIGKILL at random moments; every next run must
# restore the newest committed version bit for bit (ckpt_worker checks the
# content; `baton ckpt ls` says which version is the newest committed one).

worker() { echo "$BATON_BUILD_DIR/tests/cluster/ckpt_worker"; }
baton() { "$BATON_BUILD_DIR/cli/baton" "$@"; }

# True when srun is gone and no worker of this directory is left.
step_ended() { ! kill -0 "$SRUN_PID" 2>/dev/null && ! pgrep -f "$(worker_pattern "$dir")" >/dev/null; }

# The worker processes of DIR (the build tree runs them from .libs/ through
# libtool's wrapper), not srun, whose command line holds the same words.
worker_pattern() { echo "^[^ ]*ckpt_worker --dir $1 "; }

# A case that fails leaves no step behind: its steps run under one job
# name, cancelled by Slurm at exit (never pkill -f: a pattern built from a
# variable that is gone by then would match every process).
JOB_NAME=baton-ckpt-test-$$
kill_steps_on_exit() {
  trap 'scancel --quiet --name="$JOB_NAME" 2>/dev/null || true' EXIT
}

# The step of the newest complete version in DIR, or "none".
newest_committed() {
  baton ckpt ls "$1" --json | perl -MJSON::PP -e '
    my @v = grep { $_->{status} eq "complete" } @{ decode_json(join "", <STDIN>) };
    print @v ? (sort { $a->{seq} <=> $b->{seq} } @v)[-1]{step} : "none", "\n";'
}

# launch_until_restored OUT ARGS...: starts the worker under srun -K in the
# background and waits until rank 0 printed its restore check. A launch that
# ends before restoring is a failure: never retried.
launch_until_restored() {
  local out=$1 t0
  shift
  : >"$out"
  srun -K -N4 -n8 --mpi=pmix --job-name="$JOB_NAME" "$(worker)" "$@" >"$out" 2>&1 &
  SRUN_PID=$!
  t0=$SECONDS
  while ! grep -q '^restored step=' "$out"; do
    if ! kill -0 "$SRUN_PID" 2>/dev/null; then
      wait "$SRUN_PID" || true
      cat "$out"
      fail "the launch ended before restoring"
    fi
    [ $((SECONDS - t0)) -lt 60 ] || { kill -9 "$SRUN_PID"; cat "$out"; fail "no restore within 60s"; }
    sleep 0.1
  done
}

test_kill9_at_random_moments_restores_the_last_committed_version() {
  local dir out i expect victim pids saved pattern
  dir=$(case_dir)/ckpt
  out=$(case_dir)/worker.out
  kill_steps_on_exit
  RANDOM=4242
  for i in $(seq 1 20); do
    expect=$(newest_committed "$dir" 2>/dev/null || echo none)
    [ -d "$dir" ] || expect=none
    launch_until_restored "$out" --dir "$dir" --expect "$expect" --sleep-ms 0
    # A random moment inside the save loop: 0 to 1.5 s after the restore.
    sleep "$((RANDOM % 16)).$((RANDOM % 10))e-1"
    pattern=$(worker_pattern "$dir")
    { [ -n "$dir" ] && [ -n "$pattern" ]; } || fail "no worker pattern"  # an empty one matches everything
    mapfile -t pids < <(pgrep -f "$pattern" || true)
    [ "${#pids[@]}" -gt 0 ] || fail "iteration $i: no worker process left to kill"
    victim=${pids[$((RANDOM % ${#pids[@]}))]}
    kill -9 "$victim" 2>/dev/null || true
    wait_for 60 "srun -K to end the step after the kill" step_ended
    wait "$SRUN_PID" || true
    saved=$(grep -c '^saved step=' "$out" || true)
    echo "iteration $i: restored $expect, $saved saves, killed pid $victim"
  done
  # The last one: restore, check, save twice more, end cleanly.
  expect=$(newest_committed "$dir")
  [ "$expect" != none ] || fail "no version was ever committed"
  srun -K -N4 -n8 --mpi=pmix "$(worker)" --dir "$dir" --expect "$expect" --saves 2 >"$out" 2>&1 \
    || { cat "$out"; fail "final run failed"; }
  grep -q "^restored step=$expect ok" "$out" || fail "final run did not restore $expect"
  baton ckpt verify "$dir" --no-progress || fail "baton ckpt verify found damage after the kill loop"
}

test_restore_at_another_world_size_across_nodes() {
  local dir out
  dir=$(case_dir)/ckpt
  out=$(case_dir)/worker.out
  srun -K -N4 -n8 --mpi=pmix "$(worker)" --dir "$dir" --expect none --saves 3 >"$out" 2>&1 \
    || { cat "$out"; fail "saving with 8 ranks failed"; }
  # 8 ranks over 4 nodes wrote one shard per node; 3 ranks on 3 nodes read them.
  srun -K -N3 -n3 --mpi=pmix "$(worker)" --dir "$dir" --expect 3 --saves 1 >"$out" 2>&1 \
    || { cat "$out"; fail "restoring with 3 ranks failed"; }
  grep -q '^restored step=3 ok' "$out" || { cat "$out"; fail "3 ranks did not restore step 3"; }
  expect_eq "$(baton ckpt inspect "$dir" --step 3 --json | perl -MJSON::PP -e 'print scalar @{ decode_json(<STDIN>)->{shards} }')" 4 \
    "shard files of a version saved by 8 ranks on 4 nodes"
}

test_h5dump_reads_a_shard_written_on_the_cluster() {
  local dir out shard
  dir=$(case_dir)/ckpt
  out=$(case_dir)/worker.out
  srun -K -N2 -n4 --mpi=pmix "$(worker)" --dir "$dir" --expect none --saves 1 >"$out" 2>&1 \
    || { cat "$out"; fail "save failed"; }
  shards=("$dir"/v*/*.h5)
  shard=${shards[0]}
  h5dump -A "$shard" | grep -q 'DATASET "w"' || fail "h5dump -A does not list dataset w in $shard"
  # Row 0 of w at step 1 is W(1, 0, c) = (7919 + c) * 0.25: 1979.75, 1980, ...
  h5dump -d /w -s 0,0 -c 1,2 "$shard" | grep -q '1979.75, 1980' \
    || { h5dump -d /w -s 0,0 -c 1,2 "$shard"; fail "h5dump shows other values for w[0, 0:2]"; }
}

# Level 2 (issue 17): node-local copies on each node's private disk
# (DIR/local inside the node, DIR/disk/nK from here) with a partner copy on
# the next node, sent over MPI.
l2_dir() { echo "$BATON_CLUSTER_DIR/local/scratch/baton-l2-$$-$1"; }      # as the tasks see it
l2_on() { echo "$BATON_CLUSTER_DIR/disk/$1/scratch/baton-l2-$$-$2"; }      # node $1's, from here
wipe_node() {
  "$REPO/scripts/local-cluster" kill-node "$1"
  "$REPO/scripts/local-cluster" revive-node "$1"
  wait_for 60 "$1 to be idle" node_state_is "$1" idle
}
restored_field() { sed -n "s/^restored step=.* ok .*\b$2=\([0-9]*\).*/\1/p" "$1" | head -n 1; }

test_level2_one_node_wiped_restores_from_the_partner_copy_over_mpi() {
  local dir out l2 n shards
  dir=$(case_dir)/ckpt
  out=$(case_dir)/worker.out
  l2=$(l2_dir one)
  srun -K -N4 -n8 --mpi=pmix "$(worker)" --dir "$dir" --local-dir "$l2" --expect none --saves 2 >"$out" 2>&1 \
    || { cat "$out"; fail "saving with level 2 failed"; }
  # Every node holds its two ranks' shards and its partner's two.
  for n in n1 n2 n3 n4; do
    shards=$(find "$(l2_on "$n" one)" -path '*-s2/shard-*.h5' | wc -l)
    expect_eq "$shards" 2 "own shards of step 2 on $n"
    shards=$(find "$(l2_on "$n" one)" -path '*-s2/partner/shard-*.h5' | wc -l)
    expect_eq "$shards" 2 "partner copies of step 2 on $n"
  done
  baton ckpt ls "$dir" --json --local-dir "$(l2_on n1 one)" | grep -q '"node-local","shared"' \
    || fail "ckpt ls does not show both levels"
  # Level 3's shards are cut short; its manifests stay, so the versions are still recorded
  # there (a version removed from level 3 is not restored from level 2: docs/recovery.md).
  # A restore that succeeds can only have used level 2.
  local f
  for f in "$dir"/v*/shard-*.h5; do truncate -s 100 "$f"; done
  expect_eq "$(baton ckpt ls "$dir" --json --local-dir "$(l2_on n1 one)" | perl -MJSON::PP -e '
      print join(" ", map { $_->{step} . ":" . join(",", @{ $_->{levels} }) } @{ decode_json(join "", <STDIN>) })')" \
    "1:node-local,shared 2:node-local,shared" "ckpt ls of n1's level 2 and level 3"
  wipe_node n2
  [ -z "$(find "$(l2_on n2 one)" -name 'shard-*' 2>/dev/null)" ] || fail "n2's disk still holds shards"
  srun -K -N4 -n8 --mpi=pmix "$(worker)" --dir "$dir" --local-dir "$l2" --expect 2 --saves 0 >"$out" 2>&1 \
    || { cat "$out"; fail "restoring after wiping n2 failed"; }
  cat "$out"
  expect_eq "$(restored_field "$out" level)" 2 "level restored from"
  expect_eq "$(restored_field "$out" level3_bytes)" 0 "bytes read from level 3"
  [ "$(restored_field "$out" partner_bytes)" -gt 0 ] || fail "no bytes came from the partner copies over MPI"
  # n2's ranks got their shards back from n3's partner copies.
  shards=$(find "$(l2_on n2 one)" -path '*-s2/shard-*.h5' | wc -l)
  expect_eq "$shards" 2 "own shards of step 2 on n2 after the restore"
}

test_level2_two_neighbouring_nodes_wiped_restores_from_level3() {
  local dir out l2
  dir=$(case_dir)/ckpt
  out=$(case_dir)/worker.out
  l2=$(l2_dir two)
  srun -K -N4 -n8 --mpi=pmix "$(worker)" --dir "$dir" --local-dir "$l2" --expect none --saves 1 >"$out" 2>&1 \
    || { cat "$out"; fail "saving with level 2 failed"; }
  wipe_node n2
  wipe_node n3
  srun -K -N4 -n8 --mpi=pmix "$(worker)" --dir "$dir" --local-dir "$l2" --expect 1 --saves 0 >"$out" 2>&1 \
    || { cat "$out"; fail "restoring after wiping n2 and n3 failed"; }
  cat "$out"
  expect_eq "$(restored_field "$out" level)" 3 "level restored from"
  expect_eq "$(restored_field "$out" level2_bytes)" 0 "bytes read from level 2"
}

# A full node-local disk: the cluster's 4 MiB tmpfs (DIR/smallfs) as the
# node-local directory, filled by dd after a first save: the next saves go to
# level 3 with a warning, and the job goes on.
test_level2_full_local_disk_falls_back_to_level3_with_a_warning() {
  local dir out small l2 filler
  dir=$(case_dir)/ckpt
  out=$(case_dir)/worker.out
  small=$(dirname "$SLURM_CONF")/smallfs
  mountpoint -q "$small" || fail "$small is not the cluster's small tmpfs"
  l2=$small/baton-l2-$$
  filler=$small/filler-$$
  # shellcheck disable=SC2064 # expanded now: the locals are gone when the case's shell exits
  trap "rm -f '$filler'; rm -rf '$l2'" EXIT
  srun -K -N4 -n8 --mpi=pmix "$(worker)" --dir "$dir" --local-dir "$l2" --expect none --saves 1 >"$out" 2>&1 \
    || { cat "$out"; fail "the first save failed"; }
  dd if=/dev/zero of="$filler" bs=64k 2>/dev/null || true  # until ENOSPC
  [ "$(df --output=avail "$small" | tail -n 1)" -lt 64 ] || fail "$small is not full"
  srun -K -N4 -n8 --mpi=pmix "$(worker)" --dir "$dir" --local-dir "$l2" --expect 1 --saves 2 >"$out" 2>&1 \
    || { cat "$out"; fail "saving with a full node-local disk failed"; }
  rm -f "$filler"
  grep -q 'could not write its shard to node-local storage' "$out" || { cat "$out"; fail "no warning"; }
  grep -q 'No space left on device' "$out" || { cat "$out"; fail "the warning does not name ENOSPC"; }
  expect_eq "$(newest_committed "$dir")" 3 "the newest version in the shared directory"
  srun -K -N4 -n8 --mpi=pmix "$(worker)" --dir "$dir" --local-dir "$l2" --expect 3 --saves 0 >"$out" 2>&1 \
    || { cat "$out"; fail "restoring failed"; }
  expect_eq "$(restored_field "$out" level)" 3 "level restored from"
}

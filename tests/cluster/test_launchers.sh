# shellcheck shell=bash
# shellcheck disable=SC2016  # the batch script's text expands in the job, not here
# Launchers started inside a --baton allocation, as a new user tries them:
# Open MPI's mpirun and MPICH's Hydra read baton's hostfile and start their
# daemons through srun (so the file must name nodes as the allocation does:
# this cluster's NodeAddrs differ from its node names), and their daemons'
# steps get no baton variables. All in one job to keep the suite short.
# Sourced by run-all.

export BATON_BIN="$BATON_BUILD_DIR/cli/baton"

node_addr() { scontrol show node "$1" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p'; }

test_mpirun_and_hydra_read_the_allocations_hostfile() {
  local d job hydra=1
  d=$(case_dir)
  command -v mpiexec.hydra >/dev/null || hydra=0
  cat >"$d/job.sh" <<JOB
#!/bin/bash
#SBATCH --baton --baton-hostfile-format=openmpi
cp "\$BATON_HOSTFILE" "$d/openmpi"
timeout -k 5 60 mpirun --hostfile "\$BATON_HOSTFILE" -n 4 bash -c 'echo "\$(hostname) RANK=\${RANK-UNSET}"' >"$d/mpirun.out" 2>&1
echo "rc=\$?" >>"$d/mpirun.out"
if [ $hydra = 1 ]; then
  "\$BATON_BIN" hostfile --format=mpich >"$d/mpich"
  timeout -k 5 60 mpiexec.hydra -launcher slurm -f "$d/mpich" -n 4 bash -c 'echo "\$(hostname) RANK=\${RANK-UNSET}"' >"$d/hydra.out" 2>&1
  echo "rc=\$?" >>"$d/hydra.out"
fi
JOB
  job=$(sbatch --parsable -w 'n[1-2]' -N2 -n4 -o "$d/out" "$d/job.sh")
  wait_for 240 "job $job to complete" job_state_is "$job" COMPLETED
  cat "$d/out" "$d/openmpi" "$d/mpirun.out"
  # The file names nodes, not their addresses (n1's differs from "n1").
  [ "$(node_addr n1)" != n1 ] || fail "this cluster's NodeAddr equals the node name: the case proves nothing"
  expect_eq "$(tr '\n' '|' <"$d/openmpi")" "n1 slots=2|n2 slots=2|" "the allocation's openmpi hostfile"
  expect_eq "$(tail -n 1 "$d/mpirun.out")" "rc=0" "mpirun --hostfile \$BATON_HOSTFILE -n 4 hostname"
  # mpirun's daemons run as a step (srun ... orted) that inherits the
  # script's BATON_ENABLE=on: baton gives it nothing, so no process gets
  # the daemon's RANK (its node's index).
  expect_eq "$(grep -v '^rc=' "$d/mpirun.out" | sort | tr '\n' ' ')" \
    "n1 RANK=UNSET n1 RANK=UNSET n2 RANK=UNSET n2 RANK=UNSET " "the hosts mpirun ran on, and RANK there"
  if [ $hydra = 0 ]; then
    echo "SKIP: mpirun passed; MPICH's mpiexec.hydra is not installed (scripts/install-deps installs Debian's mpich)"
    exit 77
  fi
  cat "$d/mpich" "$d/hydra.out"
  expect_eq "$(tr '\n' '|' <"$d/mpich")" "n1:2|n2:2|" "the allocation's mpich hostfile"
  expect_eq "$(tail -n 1 "$d/hydra.out")" "rc=0" "mpiexec.hydra -launcher slurm -f FILE -n 4 hostname"
  expect_eq "$(grep -v '^rc=' "$d/hydra.out" | sort | tr '\n' ' ')" \
    "n1 RANK=UNSET n1 RANK=UNSET n2 RANK=UNSET n2 RANK=UNSET " "the hosts Hydra ran on, and RANK there"
}

# shellcheck shell=bash
# shellcheck disable=SC2016  # single-quoted commands and Python programs run in another shell (srun's) or language
# PyTorch on the local cluster, with only what baton's plugin gives a task:
# torch.distributed's env:// rendezvous across nodes (gloo). Sourced by
# run-all. Without torch (Debian's python3-torch, scripts/install-deps
# --with-torch) every case says SKIP.

PY=/usr/bin/python3  # the interpreter Debian's torch and numpy belong to

# need_torch: SKIP (exit 77) when /usr/bin/python3 cannot import torch.
need_torch() {
  local why
  why=$("$PY" -c 'import torch' 2>&1 | tail -n 1) && return 0
  echo "SKIP: torch does not import in $PY (${why:-no message}); scripts/install-deps --with-torch installs python3-torch"
  exit 77
}

# Three ranks on three nodes meet through init_process_group("gloo") with
# env:// (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the plugin) and sum
# their ranks. gloo advertises the address its host name resolves to: with
# names that resolve nowhere it was 127.0.0.1, and rank 0 on n1 connected to
# itself at n2's port ("connect [127.0.0.1]:PORT: Connection refused").
# GLOO_SOCKET_IFNAME is unset on purpose: no interface is named for it.
test_gloo_rendezvous_across_three_nodes_with_the_plugins_variables() {
  need_torch
  local out
  out=$(env -u GLOO_SOCKET_IFNAME -u TP_SOCKET_IFNAME timeout 180 \
    srun -N3 -n3 --ntasks-per-node=1 --baton "$PY" -c '
import datetime, os, socket
import torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=60))
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print("rank", dist.get_rank(), "of", dist.get_world_size(), "on", socket.gethostname(),
      "master", os.environ["MASTER_ADDR"], "sum", int(t.item()), flush=True)
dist.destroy_process_group()
' 2>&1) || { echo "$out"; fail "the gloo rendezvous failed"; }
  echo "$out"
  expect_eq "$(grep -c '^rank [0-2] of 3 on n[1-4] master .* sum 6$' <<<"$out")" 3 "ranks that summed 1+2+3 = 6"
  expect_eq "$(grep -o ' on n[1-4] ' <<<"$out" | sort -u | wc -l)" 3 "distinct nodes of the three ranks"
  ! grep -q 'Connection refused\|127\.0\.0\.1' <<<"$out" || fail "a rank connected to or advertised 127.0.0.1"
}


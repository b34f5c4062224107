#!/usr/bin/env python3
"""bench_torchft_recovery.py: torchft's (PyPI) recovery of a lost replica group,
measured beside baton's restart of the step (docs/benchmarks.md, "Recovery of
the Python examples from a node failure").

Two replica groups of one rank each (ranks <= the machine's 2 cores) train
train_fsdp.py's transformer (same size: 2 layers 128 wide) DDP-style under
torchft on CPU and gloo: torchft's Manager per group, its lighthouse in this
process, torchft's DistributedDataParallel averaging the gradients over the
groups of each step's quorum. Mid-run this process (acting as the
supervisor: torchelastic or Slurm would) kills one group's process with
SIGKILL, reaps it and starts it again at once; the new process joins the next
quorum and heals: torchft sends it the model and AdamW state from the live
peer (its HTTP checkpoint transport), then it trains on. No Slurm: processes
on this machine.

Measured per run, from the kill: detection (the survivor's first step that
fails or is not committed), restart (the new process's first line), imports
(torch and torchft), join (the model, the Manager, the wait for the
lighthouse's quorum, up to the state transfer's start), healing (the transfer
and load_state_dict), first step (to the first committed step that has the
restarted group's gradients: the healing step counts the survivor's alone),
and the survivor's stall (kill to its next committed step, beside its median
step time). The lighthouse's heartbeat timeout (torchft's default 5 s) bounds
the survivor's wait for a quorum: --heartbeat-timeout-ms and --restart-delay
show it. The load average is
printed beside each run. Usage:

    /opt/baton-venv-tft/bin/python python/bench/bench_torchft_recovery.py --runs 3
"""
import time

T_START = time.time()  # the worker's process start, before its imports

import argparse
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="runs (default 3)")
    p.add_argument("--kill-after", type=int, default=15,
                   help="kill group 1 once both groups committed this many steps together (default 15)")
    p.add_argument("--after", type=int, default=10,
                   help="steps the restarted group trains before the run ends (default 10)")
    p.add_argument("--step-ms", type=float, default=150,
                   help="extra time a step, as scripts/bench-recovery's runs (default 150)")
    p.add_argument("--timeout", type=float, default=10,
                   help="torchft's timeout for collectives and its RPCs, seconds (default 10)")
    p.add_argument("--wrapper", choices=("allreduce", "ddp"), default="allreduce",
                   help="allreduce: the flattened gradients through Manager.allreduce (default); ddp: "
                        "torchft.DistributedDataParallel, whose comm hook fails the survivor in 0.2.0 "
                        "(AssertionError 'assert fut._fut' once the peer's death fails the allreduce)")
    p.add_argument("--heartbeat-timeout-ms", type=int, default=5000,
                   help="the lighthouse's heartbeat timeout: how long a dead group still counts (default 5000, torchft's)")
    p.add_argument("--restart-delay", type=float, default=0,
                   help="seconds between the reaped process and its restart (default 0: a supervisor at once)")
    p.add_argument("--run-timeout", type=float, default=300, help="give up on a run after this long (default 300 s)")
    p.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--lighthouse", default=None, help=argparse.SUPPRESS)
    p.add_argument("--events", default=None, help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args()


def worker(args):
    """One replica group of one rank: writes a JSON line per event to args.events."""
    out = open(args.events, "a", buffering=1)

    def log(ev, **kw):
        out.write(json.dumps(dict(ev=ev, t=time.time(), **kw)) + "\n")

    log("start", t_start=T_START)
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch import nn
    from torchft import DistributedDataParallel, Manager, ProcessGroupGloo
    from torchft.checkpointing.http_transport import HTTPTransport
    log("imports")
    torch.set_num_threads(1)

    # train_fsdp.py's LM (that example imports baton at its top: this bench
    # measures torchft's path alone, so its model is repeated here)
    class LM(nn.Module):
        def __init__(self, vocab=256, dim=128, layers=2, seq=32):
            super().__init__()
            self.embed = nn.Embedding(vocab, dim)
            self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
            self.blocks = nn.ModuleList(
                nn.TransformerEncoderLayer(dim, nhead=4, dim_feedforward=4 * dim, dropout=0.1, batch_first=True)
                for _ in range(layers))
            self.head = nn.Linear(dim, vocab)
            self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

        def forward(self, x):
            h = self.embed(x) + self.pos[:x.shape[1]]
            for b in self.blocks:
                h = b(h, src_mask=self.mask[:x.shape[1], :x.shape[1]], is_causal=True)
            return self.head(h)

    torch.manual_seed(1)
    model = LM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def load_state_dict(sd):
        model.load_state_dict(sd["model"])
        opt.load_state_dict(sd["optim"])
        log("healed")

    def state_dict():
        return {"model": model.state_dict(), "optim": opt.state_dict()}

    # the state transfer, timed around torchft's own HTTP transport
    transport = HTTPTransport(timeout=timedelta(seconds=args.timeout), num_chunks=0)
    recv = transport.recv_checkpoint

    def timed_recv(*a, **kw):
        log("recv_start")
        r = recv(*a, **kw)
        log("recv_end")
        return r
    transport.recv_checkpoint = timed_recv

    # the replica group's own store (torchrun's MASTER_ADDR/PORT with one rank)
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    timeout = timedelta(seconds=args.timeout)
    manager = Manager(pg=ProcessGroupGloo(timeout=timeout), min_replica_size=1,
                      load_state_dict=load_state_dict, state_dict=state_dict,
                      replica_id=f"bench_{args.worker}", rank=0, world_size=1,
                      store_addr="127.0.0.1", store_port=store.port, lighthouse_addr=args.lighthouse,
                      timeout=timeout, quorum_timeout=timedelta(seconds=60),
                      connect_timeout=timeout, checkpoint_transport=transport)
    if args.wrapper == "ddp":
        model_call = DistributedDataParallel(manager, model)
    else:
        model_call = model
    log("manager")
    loss_fn = nn.CrossEntropyLoss()
    while manager.current_step() < args.steps:
        t0 = time.time()
        g = torch.Generator().manual_seed(1000 * args.worker + manager.current_step())
        x = torch.randint(256, (8, 33), generator=g)
        manager.start_quorum()
        opt.zero_grad()
        loss = loss_fn(model_call(x[:, :-1]).reshape(-1, 256), x[:, 1:].reshape(-1))
        loss.backward()
        if args.wrapper == "allreduce":
            # DDP's one bucket by hand: torchft's fault-tolerant allreduce of the
            # flattened gradients (an error is reported to the Manager, which
            # then refuses the commit), averaged over the quorum's participants
            grads = [p.grad for p in model.parameters()]
            flat = torch.cat([g.reshape(-1) for g in grads])
            manager.allreduce(flat).wait()
            for g, f in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
                g.copy_(f)
        time.sleep(args.step_ms / 1000)
        committed = manager.should_commit()
        if committed:
            opt.step()
        # the parameters' bytes: every group holds the same after a committed step
        digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
        log("step", step=manager.current_step(), committed=committed, t0=t0, digest=digest,
            participants=manager.num_participants(), participating=manager.is_participating(),
            loss=loss.item())
    manager.shutdown(wait=False)
    log("done")


def read_events(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def one_run(args, run, tmp):
    from torchft.coordination import LighthouseServer
    # torchft's README settings for its lighthouse (torchft_lighthouse --min_replicas 1
    # --quorum_tick_ms 100 --join_timeout_ms 10000); heartbeat timeout: its default, 5 s
    lighthouse = LighthouseServer(bind="[::]:0", min_replicas=1, join_timeout_ms=10000, quorum_tick_ms=100,
                                  heartbeat_timeout_ms=args.heartbeat_timeout_ms)
    steps = args.kill_after + 1000  # ended by this process once the restarted group has trained
    files = [os.path.join(tmp, f"run{run}-group{g}.jsonl") for g in (0, 1)]
    restarted = os.path.join(tmp, f"run{run}-group1-restarted.jsonl")

    def spawn(group, events):
        return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(group),
                                 "--lighthouse", lighthouse.address(), "--events", events,
                                 "--steps", str(steps), "--step-ms", str(args.step_ms),
                                 "--timeout", str(args.timeout), "--wrapper", args.wrapper],
                                stdout=subprocess.DEVNULL, stderr=open(events + ".stderr", "w"))
    procs = [spawn(g, files[g]) for g in (0, 1)]
    deadline = time.time() + args.run_timeout

    def wait_for(pred, what):
        while not pred():
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"run {run}: a worker exited {p.returncode} while waiting for {what} "
                                       f"(stderr in {tmp})")
            if time.time() > deadline:
                raise RuntimeError(f"run {run}: no {what} after {args.run_timeout} s (events in {tmp})")
            time.sleep(0.02)

    def counts(e):  # a step the restarted group's gradients are part of
        return e["ev"] == "step" and e["committed"] and e["participating"] and e["participants"] == 2

    def committed_together(path, n):
        if not os.path.exists(path):
            return False
        return sum(1 for e in read_events(path) if e["ev"] == "step" and e["committed"]
                   and e["participants"] == 2) >= n

    try:
        wait_for(lambda: committed_together(files[0], args.kill_after), f"{args.kill_after} steps of both groups")
        load = os.getloadavg()[0]
        t_kill = time.time()
        procs[1].send_signal(signal.SIGKILL)
        procs[1].wait()  # the supervisor sees the exit
        time.sleep(args.restart_delay)
        procs[1] = spawn(1, restarted)
        t_spawned = time.time()

        def restarted_trained():
            if not os.path.exists(restarted):
                return False
            return sum(1 for e in read_events(restarted) if counts(e)) >= args.after
        wait_for(restarted_trained, f"{args.after} committed steps of the restarted group")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        lighthouse.shutdown()

    surv = read_events(files[0])
    new = read_events(restarted)
    # the healed group must hold the survivor's parameters, bit for bit, after every step both committed
    sv_digest = {e["step"]: e["digest"] for e in surv if e["ev"] == "step" and e["committed"]}
    compared = 0
    for e in new:
        if e["ev"] == "step" and e["committed"] and e["step"] in sv_digest:
            if e["digest"] != sv_digest[e["step"]]:
                raise RuntimeError(f"run {run}: after step {e['step']} the restarted group's parameters "
                                   f"differ from the survivor's ({e['digest']} != {sv_digest[e['step']]})")
            compared += 1
    if compared == 0:
        raise RuntimeError(f"run {run}: no step committed by both groups after the restart to compare")
    sv_steps = [e for e in surv if e["ev"] == "step"]
    before = [e["t"] - e["t0"] for e in sv_steps if e["t"] < t_kill and e["committed"]]
    failed = [e for e in sv_steps if e["t"] > t_kill and not e["committed"]]
    surv_next = next(e for e in sv_steps if e["t"] > t_kill and e["committed"])
    first = lambda ev: next(e for e in new if e["ev"] == ev)  # noqa: E731
    t_first = next(e for e in new if counts(e))
    recv_start, recv_end, healed = first("recv_start"), first("recv_end"), first("healed")
    r = {
        "run": run, "load1": round(load, 2),
        "kill_to_first_step_s": t_first["t"] - t_kill,
        "detection_s": (failed[0]["t"] - t_kill) if failed else None,
        "restart_s": first("start")["t_start"] - t_kill,
        "supervisor_respawn_s": t_spawned - t_kill,
        "imports_s": first("imports")["t"] - first("start")["t_start"],
        "join_s": recv_start["t"] - first("imports")["t"],
        "healing_s": max(recv_end["t"], healed["t"]) - recv_start["t"],
        "transfer_s": recv_end["t"] - recv_start["t"],
        "first_step_s": t_first["t"] - max(recv_end["t"], healed["t"]),
        "survivor_stall_s": surv_next["t"] - t_kill,
        "survivor_failed_steps": len(failed),
        "survivor_step_median_s": statistics.median(before),
        "survivor_next_step_participants": surv_next["participants"],
        "survivor_steps_alone": sum(1 for e in sv_steps if e["t"] > t_kill and e["committed"] and e["participants"] == 1),
        "first_step_number": t_first["step"],
        "steps_equal_after_heal": compared,
        "heal_step_s": next(e for e in new if e["ev"] == "step" and e["committed"])["t"] - healed["t"],
    }
    return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}


def main():
    args = parse_args()
    if args.worker is not None:
        return worker(args)
    tmp = tempfile.mkdtemp(prefix="bench-torchft-")
    rows = []
    for run in range(1, args.runs + 1):
        r = one_run(args, run, tmp)
        print(json.dumps(r), flush=True)
        rows.append(r)
    keys = ["kill_to_first_step_s", "detection_s", "restart_s", "imports_s", "join_s", "healing_s",
            "first_step_s", "survivor_stall_s", "survivor_steps_alone", "load1"]
    print("\n" + " | ".join(["run"] + keys))
    for r in rows:
        print(" | ".join([str(r["run"])] + [str(r[k]) for k in keys]))
    print(f"(events in {tmp})")


if __name__ == "__main__":
    sys.exit(main())

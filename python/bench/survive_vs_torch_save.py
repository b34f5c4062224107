#!/opt/baton-venv/bin/python
"""What a kill -9 during a save and a flipped byte do to torch.save and to baton.

    PYTHONPATH=_build/python /opt/baton-venv/bin/python python/bench/survive_vs_torch_save.py --dir /tmp/survive

One process (baton's runtime as an MPI singleton). Each case runs its saves
and loads in child processes, as a job and its requeued successor would:

  kill -9     step 1 is saved; a child saves step 2 (--mib MiB) and is
              killed with SIGKILL once its file or shard file has bytes;
              then a new process loads the newest checkpoint.
              torch.save writes ckpt.pt in place (the usual code), so the
              kill leaves a partial file where step 1 was.
  flip        steps 1 and 2 are saved; one bit in the middle of step 2's
              tensor bytes is flipped; a new process loads.

Prints one line per case and library: what the load gave.
"""

import argparse
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

CHILD_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                 OMPI_MCA_btl="self,vader", BATON_COLLECTIVE_TIMEOUT="60")

TORCH_SAVE = """
import sys, torch
step, mib, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
w = torch.full((mib * 2**18,), float(step))
open(path + ".ready", "w").close()
torch.save({"step": step, "w": w}, path)
"""

TORCH_LOAD = """
import sys, torch
try:
    sd = torch.load(sys.argv[1])
except Exception as e:
    print(f"torch.load failed: {type(e).__name__}: {str(e)[:120]}")
    sys.exit(0)
w = sd["w"]
bad = int((w != float(sd["step"])).sum())
print(f"torch.load gave step {sd['step']}, {bad} wrong values" + (" (silently)" if bad else ""))
"""

BATON_SAVE = """
import sys, torch, baton
step, mib, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rt = baton.Runtime()
ck = baton.Checkpointer(rt, dir=path, level2=False, keep=5)
w = torch.full((mib * 2**18,), float(step))
open(path + ".ready", "w").close()
ck.save({"w": w, "step": step}, step)
ck.close()
rt.close()
"""

BATON_LOAD = """
import sys, torch, baton
path, mib = sys.argv[1], int(sys.argv[2])
rt = baton.Runtime()
ck = baton.Checkpointer(rt, dir=path, level2=False, keep=5)
state = {"w": torch.zeros(mib * 2**18), "step": 0}
try:
    got = ck.restore(state)
except baton.Error as e:
    print(f"baton restore failed: {type(e).__name__}: {str(e)[:160]}")
    sys.exit(0)
info = ck.last_restore()
bad = int((state["w"] != float(state["step"])).sum())
skipped = [f"step {f['step']} ({str(f['reason'])[:90]})" for f in info.get("fallbacks", [])]
print(f"baton restore gave step {got}, {bad} wrong values" + (f"; skipped {'; '.join(skipped)}" if skipped else ""))
ck.close()
rt.close()
"""


def child(code, *args, kill_when=None):
    """Runs ``code`` with ``args``; its last output line.

    kill_when: the child is a saver whose last argument is its path; it is
    SIGKILLed once it has made ``<path>.ready`` and kill_when() is true.
    """
    proc = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], env=CHILD_ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if kill_when is None:
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(f"child failed ({proc.returncode}):\n{out}")
        lines = out.strip().splitlines()
        return lines[-1] if lines else ""
    ready = f"{args[-1]}.ready"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not (os.path.exists(ready) and kill_when()):
        time.sleep(0.002)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    return "(killed with SIGKILL mid-save)" if killed else f"(NOT killed: the save ended first, exit {proc.returncode})"


def file_bytes(path):
    return os.path.getsize(path) if os.path.exists(path) else 0


def shard_bytes(ckdir, step):
    total = 0
    for entry in os.listdir(ckdir) if os.path.isdir(ckdir) else []:
        if entry.endswith(f"-s{step}"):
            for root, _, files in os.walk(os.path.join(ckdir, entry)):
                total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".h5"))
    return total


def flip(path, pattern):
    """Flips one bit inside the first copy of ``pattern`` (the tensor's bytes) in the file; True if found."""
    data = open(path, "rb").read()
    at = data.find(pattern)
    if at < 0:
        return False
    with open(path, "r+b") as f:
        f.seek(at + 3)
        f.write(bytes([data[at + 3] ^ 0x10]))
        f.flush()
        os.fsync(f.fileno())
    return True


def flip_baton(ckdir, step, pattern):
    version = next(e for e in sorted(os.listdir(ckdir)) if e.endswith(f"-s{step}"))
    for root, _, files in os.walk(os.path.join(ckdir, version)):
        if any(flip(os.path.join(root, f), pattern) for f in sorted(files) if f.endswith(".h5")):
            return
    raise SystemExit(f"no shard of {version} holds the tensor's bytes")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--mib", type=int, default=256)
    args = parser.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    mib = args.mib

    pt = os.path.join(args.dir, "kill", "ckpt.pt")
    os.makedirs(os.path.dirname(pt))
    child(TORCH_SAVE, 1, mib, pt)
    before = os.stat(pt).st_mtime_ns
    # torch.save reopens the file with "wb": killed once it has truncated it and written again.
    how = child(TORCH_SAVE, 2, mib, pt, kill_when=lambda: os.stat(pt).st_mtime_ns != before and file_bytes(pt) > 0)
    print(f"kill -9 during save, torch.save {how}: file {file_bytes(pt)} of ~{mib} MiB: {child(TORCH_LOAD, pt)}")

    ck = os.path.join(args.dir, "kill", "baton")
    child(BATON_SAVE, 1, mib, ck)
    how = child(BATON_SAVE, 2, mib, ck, kill_when=lambda: shard_bytes(ck, 2) > 0)
    print(f"kill -9 during save, baton {how}: {child(BATON_LOAD, ck, mib)}")

    pt = os.path.join(args.dir, "flip", "ckpt.pt")
    os.makedirs(os.path.dirname(pt))
    child(TORCH_SAVE, 2, mib, pt)
    pattern = struct.pack("<f", 2.0) * 16
    if not flip(pt, pattern):
        raise SystemExit("the tensor's bytes are not in ckpt.pt")
    print(f"one bit flipped, torch.save: {child(TORCH_LOAD, pt)}")

    ck = os.path.join(args.dir, "flip", "baton")
    child(BATON_SAVE, 1, mib, ck)
    child(BATON_SAVE, 2, mib, ck)
    flip_baton(ck, 2, pattern)
    print(f"one bit flipped, baton: {child(BATON_LOAD, ck, mib)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

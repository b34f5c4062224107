"""restore(state) and save_async's futures (issue 41 items 6, 7, 8, 17): what the state holds afterwards.

Every rank runs every test (tests/python/run-pytest: -n 1 and -n 3).
"""

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/install-deps --with-torch)")

import baton  # noqa: E402  (after the torch check)
import bit_flips  # noqa: E402  (tests/python/, on pytest's rootdir path)


def _versions(directory):
    """The version directories' names, oldest first (their seq is zero-padded)."""
    return sorted(e for e in os.listdir(directory) if e.startswith("v"))


def test_a_damaged_version_with_other_arrays_gives_the_older_version_whole(rt, shared_dir, rank):
    """Item 6: the older version (before Adam's first step: no exp_avg) is planned anew and restored whole."""
    w = torch.nn.Parameter(torch.full((4096,), 1.25))
    optim = torch.optim.Adam([w], lr=0.5)
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"w": w, "optim": optim}, 1)  # no optimizer state yet
    w.grad = torch.ones(4096)
    optim.step()
    with torch.no_grad():
        w.fill_(-3.5)
    ck.save({"w": w, "optim": optim}, 2)
    ck.close()
    if rank == 0:  # before the restore's first collective call
        bit_flips.flip_a_bit_of(shared_dir, 2, np.full(4, -3.5, dtype=np.float32).tobytes())
    w2 = torch.nn.Parameter(torch.zeros(4096))
    optim2 = torch.optim.Adam([w2], lr=0.5)
    ck2 = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    assert ck2.restore({"w": w2, "optim": optim2}) == 1
    # Every value is step 1's: none of the damaged version's bytes stayed.
    assert torch.equal(w2.detach(), torch.full((4096,), 1.25)), (w2 == -3.5).sum()
    assert optim2.state_dict()["state"] == {}
    assert [f["step"] for f in ck2.last_restore()["fallbacks"]] == [2]
    ck2.close()


def test_the_next_older_version_is_the_extensions_answer_past_a_crashed_save(rt, shared_dir, rank, monkeypatch):
    """Issue 46 item 2: after the newest version fails to verify, the next older one is the extension's answer
    (committed versions only, listed through its file layer), planned anew with its own arrays; Python lists no
    directory (os.listdir and os.scandir refuse during the restore). Before, Python's own listing took the
    crashed save's directory for a version and the restore failed with NotFound for its step."""
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"w": torch.full((4096,), 1.25)}, 1)
    ck.save({"w": torch.full((4096,), 2.5), "b": torch.full((64,), 7.0)}, 2)
    ck.save({"w": torch.full((4096,), -3.5), "b": torch.full((64,), 9.0), "c": torch.ones(3)}, 3)
    ck.close()
    names = _versions(shared_dir)
    if rank == 0:  # before the restore's first collective call
        crashed = os.path.join(shared_dir, names[1])  # step 2 as a save that died before its commit
        os.rename(os.path.join(crashed, "manifest.json"), os.path.join(crashed, "manifest.json.lost"))
        bit_flips.flip_a_bit_in(shared_dir, names[2], np.full(4, -3.5, dtype=np.float32).tobytes())
    ck2 = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    state = {"w": torch.zeros(4096), "b": torch.full((64,), -1.0), "c": torch.full((3,), -1.0)}

    def refuse(*args, **kwargs):
        raise AssertionError(f"Python listed a directory during restore(state): {args!r}")

    monkeypatch.setattr(os, "listdir", refuse)
    monkeypatch.setattr(os, "scandir", refuse)
    found = ck2.restore(state, strict=False)
    monkeypatch.undo()
    assert found == 1
    assert torch.equal(state["w"], torch.full((4096,), 1.25))
    # Step 1 holds neither: they keep the program's values, nothing of step 3's read stayed.
    assert torch.equal(state["b"], torch.full((64,), -1.0)) and torch.equal(state["c"], torch.full((3,), -1.0))
    fallbacks = ck2.last_restore()["fallbacks"]
    assert [os.path.basename(f["path"]) for f in fallbacks] == [names[2]], fallbacks
    assert "checksum" in fallbacks[0]["reason"] or "xxh3" in fallbacks[0]["reason"], fallbacks
    ck2.close()


def test_a_step_saved_twice_falls_back_by_version_not_by_step(rt, shared_dir, rank):
    """Issue 46 item 2: v1-s10, v2-s20, v3-s10 (back to step 10, then saved again); v3 and v2 damaged. The
    restore goes to v1, the version older than v2, never again to v3 (the newest copy of 'step 10')."""
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"w": torch.full((4096,), 1.25)}, 10)
    ck.save({"w": torch.full((4096,), 2.5)}, 20)
    ck.save({"w": torch.full((4096,), -3.5)}, 10)
    ck.close()
    names = _versions(shared_dir)
    if rank == 0:
        bit_flips.flip_a_bit_in(shared_dir, names[2], np.full(4, -3.5, dtype=np.float32).tobytes())
        bit_flips.flip_a_bit_in(shared_dir, names[1], np.full(4, 2.5, dtype=np.float32).tobytes())
    ck2 = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    w = torch.zeros(4096)
    assert ck2.restore({"w": w}) == 10
    assert torch.equal(w, torch.full((4096,), 1.25))
    info = ck2.last_restore()
    assert os.path.basename(info["version_path"]) == names[0]
    assert [os.path.basename(f["path"]) for f in info["fallbacks"]] == [names[2], names[1]], info["fallbacks"]
    ck2.close()


def test_a_damaged_manifest_is_passed_over_counted_once(rt, shared_dir, rank):
    """The newest version's manifest.json fails its checksum: restore(state) plans on the older version, lists the
    newest in last_restore()'s fallbacks as counted, and its restore-failures file holds one failure (the pass reads
    the manifest once to plan and restores the planned version pinned: the failure is recorded once, not by both)."""
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"w": torch.full((4096,), 1.25)}, 1)
    ck.save({"w": torch.full((4096,), -3.5)}, 2)
    ck.close()
    names = _versions(shared_dir)
    if rank == 0:
        path = os.path.join(shared_dir, names[1], "manifest.json")
        with open(path, "rb") as f:
            text = bytearray(f.read())
        text[len(text) // 2] ^= 0x20
        with open(path, "wb") as f:
            f.write(bytes(text))
    ck2 = baton.Checkpointer(rt, dir=shared_dir, level2=False)  # its open is collective: after rank 0's edit
    w = torch.zeros(4096)
    assert ck2.restore({"w": w}) == 1
    assert torch.equal(w, torch.full((4096,), 1.25))
    info = ck2.last_restore()
    assert os.path.basename(info["version_path"]) == names[0], info
    (skipped,) = info["fallbacks"]
    assert os.path.basename(skipped["path"]) == names[1] and skipped["counted"] is True, skipped
    assert skipped["code"] == "Corruption" and "manifest_xxh3" in skipped["reason"], skipped
    ck2.close()
    if rank == 0:
        with open(os.path.join(shared_dir, names[1], "restore-failures")) as f:
            lines = [line for line in f.read().splitlines() if line.strip()]
        assert len(lines) == 1, lines


def test_no_older_version_names_every_failure_and_leaves_the_state(rt, shared_dir, rank):
    """Issue 46 item 2: the only version fails to verify: NotFound naming it and its reason, the state untouched."""
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"w": torch.full((4096,), -3.5)}, 4)
    ck.close()
    names = _versions(shared_dir)
    if rank == 0:
        bit_flips.flip_a_bit_in(shared_dir, names[0], np.full(4, -3.5, dtype=np.float32).tobytes())
    ck2 = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    w = torch.full((4096,), 2.0)
    for step in (None, 4):
        with pytest.raises(baton.NotFound) as e:
            ck2.restore({"w": w}, step=step)
        assert names[0] in str(e.value) and "none" in str(e.value), e.value
        assert torch.equal(w, torch.full((4096,), 2.0))
        # The failure is listed once, as the extension recorded it: counted toward quarantine (before: "not
        # counted", the extension's record of a restore that raised was lost).
        failed = ck2.last_restore()["fallbacks"]
        assert [os.path.basename(f["path"]) for f in failed] == [names[0]], failed
        assert failed[0]["counted"] is True and failed[0]["code"] == "Corruption", failed
    ck2.close()


def test_damage_in_the_last_chunk_leaves_every_tensor_untouched(rt, shared_dir, rank):
    """The state's own tensors are registered for the read (no scratch copy): a flipped bit in the last of
    a tensor's four 2 MiB chunks, behind intact chunks of it and of another tensor, leaves both tensors as
    they were on every rank (the restore verifies all before it writes any: verify_before_write)."""
    n = 2 << 20  # 8 MiB of float32: four chunks
    saved_b = torch.full((n,), 0.25)
    saved_b[-4:] = -7.0  # only the last chunk holds these
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"a": torch.full((n // 4,), 1.5), "b": saved_b}, 3)
    ck.close()
    names = _versions(shared_dir)
    if rank == 0:
        pattern = np.full(4, -7.0, dtype=np.float32).tobytes()
        hit = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(shared_dir, names[0])) for f in fs
               if f.endswith(".h5") and pattern in open(os.path.join(r, f), "rb").read()]
        assert len(hit) == 1, hit
        data = open(hit[0], "rb").read()
        at = data.rfind(pattern)
        with open(hit[0], "r+b") as f:
            f.seek(at + 3)
            f.write(bytes([data[at + 3] ^ 0x04]))
    a, b = torch.full((n // 4,), 2.0), torch.full((n,), 3.0)
    ck2 = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    with pytest.raises(baton.NotFound) as e:
        ck2.restore({"a": a, "b": b})
    assert names[0] in str(e.value), e.value
    assert torch.equal(a, torch.full((n // 4,), 2.0)), (a != 2.0).sum()
    assert torch.equal(b, torch.full((n,), 3.0)), (b != 3.0).sum()
    ck2.close()


def test_restore_in_place_moves_the_autograd_version_counter(rt, shared_dir):
    """Item 8: a graph built before the restore refuses backward, as after copy_."""
    w = torch.nn.Parameter(torch.arange(6, dtype=torch.float32))
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"w": w}, 1)
    loss = (w * w).sum()  # saves w for backward
    before = w._version
    assert ck.restore({"w": w}) == 1
    assert w._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    ck.close()


def test_replicas_verify_refuses_copies_that_differ_and_rank0_saves_rank0s_copy(rt, shared_dir, rank, size):
    """Item 7: BatchNorm's running statistics differ between ranks before DDP's next broadcast."""
    bn = torch.nn.BatchNorm1d(3)
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([1.0, 2.0, 3.0]) + rank)
    state = {"bn": bn}
    ck = baton.Checkpointer(rt, dir=os.path.join(shared_dir, "verify"), level2=False)
    if size > 1:
        with pytest.raises(baton.InvalidArgument, match=r"replicas='rank0'") as e:
            ck.save(state, 1)
        assert "bn:running_mean" in str(e.value) and e.value.code == "InvalidArgument"
    else:
        ck.save(state, 1)
    ck.close()
    with pytest.raises(baton.InvalidArgument, match="replicas='verify' or replicas='rank0'"):
        baton.Checkpointer(rt, dir=os.path.join(shared_dir, "verify"), verify_replicas=False)

    ck = baton.Checkpointer(rt, dir=os.path.join(shared_dir, "rank0"), level2=False, replicas="rank0")
    ck.save(state, 1)
    # The program's own copy is left as it was on every rank.
    assert torch.equal(bn.running_mean, torch.tensor([1.0, 2.0, 3.0]) + rank)
    back = torch.nn.BatchNorm1d(3)
    assert ck.restore({"bn": back}) == 1
    # Rank 0's copy, whole, on every rank: never rows stitched from several ranks.
    assert torch.equal(back.running_mean, torch.tensor([1.0, 2.0, 3.0]))
    ck.close()


def test_each_future_acts_on_its_own_step(rt, shared_dir):
    """Item 17: a future whose save a later call completed is committed; it never waits on a later save."""
    t = torch.arange(8, dtype=torch.float32)
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    first = ck.save_async({"t": t}, 1)
    second = ck.save_async({"t": t}, 2)  # commits step 1 first
    assert first.status() == "committed"
    first.wait()  # returns at once: not step 2's wait
    assert second.status() in ("writing", "written")
    second.wait()
    assert second.status() == "committed"
    assert ck.read_metadata()["step"] == 2
    ck.close()


def test_restore_takes_the_newest_version_as_documented(rt, shared_dir):
    """Item 17: the newest committed version, not the highest step; ``step=`` chooses."""
    t = torch.zeros(3)
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"t": t + 5}, 5)
    ck.save({"t": t + 3}, 3)  # a lower step saved later (back to an earlier point)
    back = torch.zeros(3)
    assert ck.restore({"t": back}) == 3 and torch.equal(back, t + 3)
    assert ck.restore({"t": back}, step=5) == 5 and torch.equal(back, t + 5)
    assert "the highest step unless" in " ".join(baton.Checkpointer.restore.__doc__.split())
    ck.close()


class _Root:
    """One object as the whole state of a restore: ``live`` is its state_dict(), ``got`` what it is given."""

    def __init__(self, live):
        self.live, self.got = live, None

    def state_dict(self):
        return self.live

    def load_state_dict(self, value):
        self.got = value


def test_a_version_restores_whole_into_one_object(rt, shared_dir):
    """restore(obj): the version's tree, whatever its keys, goes to obj.load_state_dict (tensors allocated from
    the version, or read into the live ones obj.state_dict() holds); save(obj) stays a dict's. Before, a state
    that was not a dict was a TypeError."""
    w, ids = torch.arange(6, dtype=torch.float64) / 7, torch.arange(5, dtype=torch.int32)
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"w": w, "meta": {"epoch": 3, "tags": ["a", "b"], "ids": ids}}, 4)
    root = _Root({})
    assert ck.restore(root) == 4
    assert sorted(root.got) == ["meta", "w"] and root.got["meta"]["epoch"] == 3
    assert root.got["meta"]["tags"] == ["a", "b"]
    assert torch.equal(root.got["w"], w) and torch.equal(root.got["meta"]["ids"], ids)
    live = torch.zeros(6, dtype=torch.float64)
    root = _Root({"w": live})
    assert ck.restore(root) == 4 and root.got["w"] is live and torch.equal(live, w)
    with pytest.raises(TypeError, match="restore\\(state, ...\\): the state must be a dict .* to restore, one object"):
        ck.restore([w])
    with pytest.raises(TypeError, match="save\\(state, ...\\): the state must be a dict of names"):
        ck.save(_Root({"w": w}), 5)
    ck.close()


def test_after_a_restore_the_state_is_registered_and_the_scratch_freed(rt, shared_dir):
    """The restore's scratch is replaced by the state's own tensors: the next save registers nothing again."""
    torch.manual_seed(0)  # the same weights on every rank (replicas='verify'), whatever earlier tests drew
    model = torch.nn.Linear(4, 3)
    state = {"model": model}
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save(state, 1)
    assert ck.restore(state) == 1
    registered = {name: b for name, (b, _) in ck._bindings.items() if b is not None}
    assert all(not b.mirror for b in registered.values()), "a scratch buffer is still registered"
    calls = []
    low = ck._low

    class Counting:
        def __getattr__(self, name):
            attr = getattr(low, name)
            if name.startswith("register_"):
                return lambda *a, **k: (calls.append(a[0]), attr(*a, **k))[1]
            return attr

        def __setattr__(self, name, value):
            setattr(low, name, value)

    ck._low = Counting()
    ck.save(state, 2)
    ck._low = low
    assert calls == []
    ck.close()


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.out = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.out(torch.relu(self.bn(self.fc(x))))


def test_the_documented_ddp_loop_with_batchnorm_saves_and_resumes(rt, shared_dir, rank, size):
    """Item 7: docs/python.md's loop under DDP with BatchNorm, replicas="rank0": every save works (the running
    statistics differ between the ranks after each step), and a resumed run restores rank 0's."""
    import torch.distributed as dist
    # Rank 0's store on a port the kernel picks (baton.init_process_group): a port derived from the directory
    # (20000 + crc32 % 20000) lay in Linux's ephemeral range and met EADDRINUSE (issue 46, tests).
    env = {"MASTER_ADDR": "127.0.0.1"}
    os.environ.update(env)
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    baton.init_process_group(rt, backend="gloo", timeout=60)
    try:
        def run(steps, seed):
            torch.manual_seed(seed)
            model = torch.nn.parallel.DistributedDataParallel(_Net())
            opt = torch.optim.Adam(model.parameters())
            gen = torch.Generator().manual_seed(100 + rank)  # each rank its own data, as a sampler gives
            ck = baton.Checkpointer(rt, dir=shared_dir, level2=False, replicas="rank0")
            state = {"model": model.module, "optim": opt, "data": baton.GeneratorState(gen)}
            start = ck.restore(state) or 0
            for step in range(start, steps):
                loss = model(torch.randn(16, 4, generator=gen)).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                if (step + 1) % 2 == 0:
                    ck.save(state, step + 1)
            ck.wait()
            ck.close()
            return start, model.module

        start, first = run(4, seed=1)
        assert start == 0
        # The running mean differs between the ranks (each saw its own batches): rank 0's was saved.
        mean = first.bn.running_mean.clone()
        everyone = [torch.zeros_like(mean) for _ in range(size)]
        dist.all_gather(everyone, mean)
        if size > 1:
            assert not torch.equal(everyone[0], everyone[1])
        start, second = run(4, seed=2)  # resumes at step 4: nothing left to run
        assert start == 4
        assert torch.equal(second.bn.running_mean, everyone[0])  # rank 0's, on every rank
        assert torch.equal(second.fc.weight, first.fc.weight)   # DDP's parameters: the same everywhere
    finally:
        dist.destroy_process_group()
        for k in env:
            os.environ.pop(k, None)


def test_a_load_reads_each_byte_once_verified_and_passes_over_a_damaged_version(rt, shared_dir, rank):
    """Issue 48: load() (and baton.lightning's load) fills only tensors it makes itself, which the program gets
    after the read verified: one read, verifying each chunk as it goes (a restore into the state's own tensors
    reads twice: every rank verifies before any is written). A damaged newest version is still passed over
    whole: what load() returns is the older version's, every byte."""
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"w": torch.full((4096,), 1.25)}, 1)
    ck.save({"w": torch.full((4096,), -3.5)}, 2)
    ck.close()
    if rank == 0:  # before the load's first collective call
        bit_flips.flip_a_bit_of(shared_dir, 2, np.full(4, -3.5, dtype=np.float32).tobytes())
    ck2 = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    got = ck2.load()
    assert torch.equal(got["w"], torch.full((4096,), 1.25)), (got["w"] == -3.5).sum()
    assert [f["step"] for f in ck2.last_restore()["fallbacks"]] == [2]
    # 128 KiB: split over the ranks (an array under 64 KiB is verified whole by the one rank that wrote it).
    w = torch.full((32768,), 0.5)
    ck2.save({"w": w}, 3)
    assert torch.equal(ck2.load()["w"], w)
    once = ck2.last_stats()["bytes_read"]
    live = torch.zeros(32768)
    assert ck2.restore({"w": live}) == 3 and torch.equal(live, w)
    twice = ck2.last_stats()["bytes_read"]
    assert w.nbytes <= once < twice, (once, twice)
    ck2.close()

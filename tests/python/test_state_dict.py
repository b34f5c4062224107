"""baton.Checkpointer's state-dict form with PyTorch (tests/python/run-pytest: -n 1 and -n 3).

Every rank runs every test (collective calls in the same order). The model's
tensors are the same on every rank, as under DDP (same seed, same data), so
they are replicated arrays; Python's `random` is seeded per rank, so
RNGState's per-rank state differs between ranks.
"""

import gc
import random
import socket

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/install-deps --with-torch)")

import baton  # noqa: E402  (after the torch check)


class Loader:
    """A data loader's cursor: an object with state_dict()/load_state_dict() of plain values."""

    def __init__(self):
        self.pos = 0
        self.epoch = 0
        self.order = (3, 1, 2)

    def state_dict(self):
        return {"pos": self.pos, "epoch": self.epoch, "order": self.order, "frac": 0.1}

    def load_state_dict(self, state):
        assert type(state["order"]) is tuple and state["frac"] == 0.1
        self.pos, self.epoch, self.order = state["pos"], state["epoch"], state["order"]


def make_model(seed, dtype=torch.float32):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 2))
    return model.to(dtype)


def train(model, optim, loader, steps):
    for _ in range(steps):
        x, y = torch.randn(8, 6), torch.randn(8, 2)
        loss = ((model(x) - y) ** 2).mean()
        optim.zero_grad()
        loss.backward()
        optim.step()
        loader.pos += 8


def same_tensors(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_tensors(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_tensors(x, y) for x, y in zip(a, b))
    return a == b


def rng_snapshot():
    return random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone()


def test_round_trip_model_adam_rng_loader_continues_bit_identical(rt, shared_dir, rank):
    torch.manual_seed(1)
    np.random.seed(7)
    random.seed(1000 + rank)  # per-rank state
    model = make_model(0)
    optim = torch.optim.Adam(model.parameters(), lr=0.01)
    loader = Loader()
    extra = {"lr_scale": 0.1, "history": [1.5, float("inf")], 7: "int key"}
    state = {"model": model, "optim": optim, "loader": loader, "rng": baton.RNGState(), "extra": extra}
    ck = baton.Checkpointer(rt, dir=shared_dir)
    assert ck.restore(state) is None  # a first run
    train(model, optim, loader, 3)
    ck.save(state, 3)
    saved_rng = rng_snapshot()
    train(model, optim, loader, 2)  # the uninterrupted run goes on to step 5
    want_model, want_optim = model.state_dict(), optim.state_dict()
    want_rng = rng_snapshot()
    ck.close()

    # The requeued program: everything fresh, other seeds, optimizer without state.
    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)
    model2 = make_model(42)
    optim2 = torch.optim.Adam(model2.parameters(), lr=0.01)
    assert optim2.state_dict()["state"] == {}
    loader2 = Loader()
    extra2 = {"lr_scale": 9.0, "history": [], 7: "other"}
    state2 = {"model": model2, "optim": optim2, "loader": loader2, "rng": baton.RNGState(), "extra": extra2}
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    assert ck2.restore(state2) == 3
    assert state2["extra"] is extra2 and extra2 == {"lr_scale": 0.1, "history": [1.5, float("inf")], 7: "int key"}
    assert loader2.pos == 24 and loader2.order == (3, 1, 2)
    got = rng_snapshot()
    assert got[0] == saved_rng[0] and np.array_equal(got[1], saved_rng[1]) and torch.equal(got[2], saved_rng[2])
    train(model2, optim2, loader2, 2)
    assert same_tensors(want_model, model2.state_dict())
    assert same_tensors(want_optim, optim2.state_dict())
    assert rng_snapshot()[0] == want_rng[0]
    ck2.close()


def test_restore_into_fresh_optimizer_allocates_lazy_state(rt, shared_dir):
    model = make_model(0)
    optim = torch.optim.Adam(model.parameters(), lr=0.01)
    train(model, optim, Loader(), 1)
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save({"model": model, "optim": optim}, 1)
    names = {a["name"] for a in ck.read_metadata()["arrays"]}
    assert {"optim:state:0:exp_avg", "optim:state:0:exp_avg_sq", "optim:state:0:step", "model:0.weight"} <= names
    ck.close()

    model2 = make_model(5)
    optim2 = torch.optim.Adam(model2.parameters(), lr=0.01)
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    assert ck2.restore({"model": model2, "optim": optim2}) == 1
    assert same_tensors(optim.state_dict(), optim2.state_dict())
    # The restored state belongs to model2's parameters: a step moves them as the original's.
    for m, o in ((model, optim), (model2, optim2)):
        torch.manual_seed(5)
        train(m, o, Loader(), 1)
    assert same_tensors(model.state_dict(), model2.state_dict())
    ck2.close()


def test_bf16_model_round_trip(rt, shared_dir):
    model = make_model(3, torch.bfloat16)
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save({"model": model}, 10)
    assert {a["dtype"] for a in ck.read_metadata()["arrays"] if a["name"].startswith("model:")} == {"bf16", "i64"}
    ck.close()
    model2 = make_model(4, torch.bfloat16)
    assert not torch.equal(model.state_dict()["0.weight"], model2.state_dict()["0.weight"])
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    assert ck2.restore({"model": model2}) == 10
    for k, v in model.state_dict().items():
        w = model2.state_dict()[k]
        assert w.dtype == v.dtype and torch.equal(w.view(torch.int16) if w.dtype == torch.bfloat16 else w,
                                                  v.view(torch.int16) if v.dtype == torch.bfloat16 else v), k
    ck2.close()


# Every dtype DCP saves (issue 46 item 5): complex and the float8 variants baton has no dtype of are stored
# as the same bytes under one it has (baton.tensors.stored_view), as BatonWriter stores them.
TORCH_DTYPES = ["float32", "float64", "bfloat16", "float16", "int32", "int64", "uint8", "bool", "int8", "int16",
                "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2", "complex64", "complex128"] + \
    [n for n in ("float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu") if hasattr(torch, n)]


def _bits(t):
    """The tensor's bytes, comparable whatever its dtype (torch.equal has no 8-bit floats)."""
    return t.contiguous().view(torch.uint8) if t.element_size() == 1 else t


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_every_torch_dtype_round_trips(rt, shared_dir, dtype):
    dt = getattr(torch, dtype)
    gen = torch.Generator().manual_seed(11)
    if dt == torch.bool:
        t = torch.rand(5, 3, generator=gen) > 0.5
    elif dt.is_complex:
        t = torch.complex(torch.randn(5, 3, generator=gen), torch.randn(5, 3, generator=gen)).to(dt)
    elif dtype.startswith("float8"):
        t = torch.randn(5, 3, generator=gen).abs().to(dt)  # e8m0 holds powers of two only: no sign
    elif dt.is_floating_point:
        t = torch.randn(5, 3, generator=gen).to(dt)
    else:
        t = torch.randint(0, 100, (5, 3), generator=gen).to(dt)
    ck = baton.Checkpointer(rt, dir=shared_dir)
    try:
        ck.save({"t": t, "scalar": t[0, 0].clone()}, 1)
    except baton.InvalidArgument as e:
        if "has no baton dtype" in str(e) or "not a baton dtype" in str(e):
            ck.close()
            pytest.skip(f"this build of baton has no type for torch.{dtype}: {e}")
        raise
    ck.close()
    back, scalar = torch.zeros_like(t), torch.zeros_like(t[0, 0])
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    assert ck2.restore({"t": back, "scalar": scalar}) == 1
    assert back.dtype == dt and torch.equal(_bits(back), _bits(t))
    assert torch.equal(_bits(scalar.reshape(1)), _bits(t[0, 0].reshape(1)))
    ck2.close()


def test_the_same_stored_bytes_under_another_dtype_are_refused(rt, shared_dir):
    """Issue 46 item 5: complex64 is stored as float32 pairs, float8_e4m3fnuz as uint8; a state whose tensor has
    the stored dtype and shape (not the saved one) is refused naming both, not filled with reinterpreted bytes."""
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save({"c": torch.complex(torch.ones(4), -torch.ones(4)), "u": torch.arange(4, dtype=torch.uint8)}, 1)
    ck.close()
    pairs, odd = torch.zeros(4, 2), torch.zeros(4, dtype=torch.uint8)
    state = {"c": pairs, "u": odd}
    if hasattr(torch, "float8_e4m3fnuz"):
        state["u"] = odd = torch.zeros(4, dtype=torch.float8_e4m3fnuz)
    with baton.Checkpointer(rt, dir=shared_dir) as ck2, pytest.raises(baton.InvalidArgument) as e:
        ck2.restore(state)
    assert "'c': dtype float32 in the state, complex64 in the checkpoint" in str(e.value), e.value
    if odd.dtype != torch.uint8:
        assert "'u': dtype float8_e4m3fnuz in the state, uint8 in the checkpoint" in str(e.value), e.value
    assert torch.equal(pairs, torch.zeros(4, 2))


def test_strict_refuses_naming_paths_and_strict_false_restores_the_rest(rt, shared_dir):
    model = make_model(0)
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save({"model": model, "emb": torch.ones(4, 3), "half": torch.ones(2), "note": "x"}, 2)
    ck.close()

    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    other = make_model(1)
    emb, half, extra = torch.zeros(5, 3), torch.zeros(2, dtype=torch.float16), torch.zeros(1)
    state = {"model": other, "emb": emb, "half": half, "new": extra}
    with pytest.raises(baton.InvalidArgument) as e:
        ck2.restore(state)
    text = str(e.value)
    assert "'emb': shape (5, 3) in the state, (4, 3) in the checkpoint" in text
    assert "'half': dtype f16 in the state, f32 in the checkpoint" in text
    assert "'new': in the state, not in the checkpoint" in text
    assert "'note': in the checkpoint, not in the state" in text
    assert not torch.equal(other.state_dict()["0.weight"], model.state_dict()["0.weight"])  # nothing restored

    # strict=False: keys one side lacks are let be; a shape or dtype still refuses.
    with pytest.raises(baton.InvalidArgument, match="'emb': shape"):
        ck2.restore(state, strict=False)
    state = {"model": other, "new": extra}
    assert ck2.restore(state, strict=False) == 2
    assert same_tensors(model.state_dict(), other.state_dict())
    assert torch.equal(extra, torch.zeros(1))
    ck2.close()

    # A module that lacks a key (its own strictness): refused naming the path.
    ck3 = baton.Checkpointer(rt, dir=shared_dir)
    smaller = torch.nn.Sequential(torch.nn.Linear(6, 16))
    with pytest.raises(baton.InvalidArgument, match="'model/1.weight': in the checkpoint, not in the state"):
        ck3.restore({"model": smaller, "emb": torch.zeros(4, 3), "half": torch.zeros(2), "note": ""})
    ck3.close()


@pytest.mark.parametrize("what", ["lambda", "socket"])
def test_unkeepable_leaf_is_a_type_error_naming_its_path(rt, shared_dir, what):
    leaf = (lambda: 1) if what == "lambda" else socket.socket()
    try:
        ck = baton.Checkpointer(rt, dir=shared_dir)
        state = {"model": make_model(0), "loader": {"hooks": [1, {"bad": leaf}]}}
        with pytest.raises(TypeError, match=r"cannot keep 'loader/hooks/1/bad'"):
            ck.save(state, 1)
        assert ck.read_metadata() is None  # nothing was saved
        ck.close()
    finally:
        if what == "socket":
            leaf.close()


def test_async_save_keeps_the_bytes_at_the_call(rt, shared_dir):
    model = make_model(0)
    emb = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    want = {k: v.clone() for k, v in model.state_dict().items()}
    want_emb = emb.clone()
    ck = baton.Checkpointer(rt, dir=shared_dir)
    fut = ck.save_async({"model": model, "emb": emb}, 4)
    with torch.no_grad():  # the program goes on at once
        for p in model.parameters():
            p.add_(1.0)
        emb.mul_(-1)
    assert fut.status() in ("writing", "written")
    fut.wait()
    assert fut.status() == "committed" and ck.async_status() == "idle"
    ck.close()
    model2, emb2 = make_model(9), torch.zeros(4, 3)
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    assert ck2.restore({"model": model2, "emb": emb2}) == 4
    assert same_tensors(want, model2.state_dict()) and torch.equal(emb2, want_emb)
    ck2.close()


def test_replicated_state_is_written_once_in_total(rt, shared_dir, size):
    model = make_model(0)
    state = {"model": model}
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save(state, 1)
    stats = ck.last_stats()
    nbytes = sum(t.numel() * t.element_size() for t in model.state_dict().values()) + 8  # + the format marker
    assert stats["total_bytes"] == nbytes
    # Each rank writes about 1/size of it (rows spread over the ranks): at
    # most one row more of each array than its share; an array under 64 KiB
    # (ckpt/layout.h's kWholeReplicatedBytes) whole at one rank, the marker too.
    whole = [t.numel() * t.element_size() for t in model.state_dict().values()
             if t.numel() * t.element_size() < 64 << 10] + [8]
    slack = sum(t[0].numel() * t.element_size() if t.dim() else 8 for t in model.state_dict().values()) + 8
    assert stats["bytes"] <= nbytes // size + slack + sum(whole)
    # Written once in total all the same: the ranks' bytes add up to the state's.
    each = baton._baton._allgather_bytes(rt, stats["bytes"].to_bytes(8, "little"), "the bytes each rank wrote", fixed=8)
    assert sum(int.from_bytes(b, "little") for b in each) == nbytes
    ck.close()


def test_registrations_are_reused_while_the_tensors_are_the_same(rt, shared_dir):
    model = make_model(0)
    ck = baton.Checkpointer(rt, dir=shared_dir)
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
    state = {"model": model}
    ck.save(state, 1)
    first = len(calls)
    assert first == len(model.state_dict()) + 1  # + the format marker
    ck.save(state, 2)
    assert len(calls) == first  # the same tensors: nothing registered again
    model[0].weight.data = torch.zeros(16, 6)  # new memory for one parameter
    ck.save(state, 3)
    assert calls[first:] == ["model:0.weight"]
    ck._low = low
    ck.close()


def test_a_tensor_that_needs_grad_or_is_not_contiguous(rt, shared_dir):
    # The same on every rank (replicas="verify"), whatever the generators' state: not torch.randn, which after
    # a relaunch in the middle of this file drew other values on each rank.
    w = (torch.arange(24, dtype=torch.float32).reshape(4, 6) * 0.37 - 2.0).requires_grad_()
    t = torch.arange(24, dtype=torch.float32).reshape(6, 4).t()  # a non-contiguous view
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save({"w": w, "t": t}, 1)
    ck.close()
    w2, t2 = torch.zeros(4, 6, requires_grad=True), torch.zeros(6, 4).t()
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    assert ck2.restore({"w": w2, "t": t2}) == 1
    assert torch.equal(w2, w) and torch.equal(t2, t) and w2.requires_grad
    ck2.close()


class _SeesTheCollector:
    """An object of the state whose state_dict() records whether the cyclic collector runs (the walk calls it)."""

    def __init__(self):
        self.seen = []
        self.value = 1

    def state_dict(self):
        self.seen.append(gc.isenabled())
        return {"value": self.value}

    def load_state_dict(self, sd):
        self.seen.append(gc.isenabled())
        self.value = sd["value"]


def test_the_calls_pause_the_cyclic_collector_and_leave_it_as_they_found_it(rt, shared_dir):
    """Issue 48: a save's walk of 5,000 leaves made 32,500 objects, and the collector's runs over the whole
    process cost 0.045-0.065 s of a 0.075-0.095 s walk: the calls run with it paused (baton/gc_pause.py), and
    leave it on, or off where the program had turned it off, even when they raise."""
    obj = _SeesTheCollector()
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    state = {"obj": obj, "w": torch.arange(4.0)}
    assert gc.isenabled()
    ck.save(state, 1)
    ck.save_async(state, 2).wait()
    assert ck.restore(state) == 2
    assert ck.load()["obj"]["value"] == 1
    assert obj.seen and not any(obj.seen), obj.seen
    assert gc.isenabled()
    with pytest.raises(baton.InvalidArgument):
        ck.restore(state, step=-1)
    assert gc.isenabled(), "a call that raised left the collector paused"
    gc.disable()
    try:
        ck.save(state, 3)
        assert not gc.isenabled(), "the program's own gc.disable() was undone"
    finally:
        gc.enable()
    ck.close()


def test_a_save_takes_the_last_walks_items_again_only_for_unchanged_leaves(rt, shared_dir):
    """Issue 48: the walk takes an item of the Checkpointer's last walk again for a tensor leaf with the same
    memory, dtype, shape, strides and device (a third of a 5,000-leaf walk was making them anew), a module's
    parameters too (its state_dict() makes new views of them at every call); a leaf whose .data was replaced
    by another dtype or shape, or a new tensor at the same path, is described anew, and what is saved and
    restored is the state as it is now."""
    w, b = torch.arange(6.0), torch.zeros(3)
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():  # the same replica on every rank
        lin.weight.copy_(torch.arange(4.0).reshape(2, 2))
        lin.bias.fill_(0.5)
    state = {"w": w, "b": b, "n": 1, "lin": lin}
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save(state, 1)
    first = dict(ck._last_walk.items)
    ck.save(state, 2)
    second = ck._last_walk.items
    assert all(second[k] is first[k] for k in first), "unchanged leaves were described anew"
    w.data = torch.arange(8, dtype=torch.float64).reshape(2, 4)  # the same Parameter-like object, another tensor
    state["b"] = torch.ones(3)                                      # another object at the same path
    state["n"] = 2
    ck.save(state, 3)
    third = ck._last_walk.items
    names = {item.path: name for name, item in third.items()}
    assert third[names[("w",)]] is not first[names[("w",)]]
    assert third[names[("w",)]].dtype == "float64" and third[names[("w",)]].shape == (2, 4)
    assert third[names[("b",)]] is not first[names[("b",)]]
    assert third[names[("lin", "weight")]] is first[names[("lin", "weight")]], "a module's parameter"
    assert third[names[("lin", "weight")]].leaf is ck._last_walk.state_dicts[("lin",)]["weight"]
    saved_lin = {k: v.clone() for k, v in lin.state_dict().items()}
    got = {"w": torch.zeros(2, 4, dtype=torch.float64), "b": torch.zeros(3), "n": 0, "lin": torch.nn.Linear(2, 2)}
    assert ck.restore(got) == 3
    for k, v in got["lin"].state_dict().items():
        assert torch.equal(v, saved_lin[k]), k
    assert torch.equal(got["w"], torch.arange(8, dtype=torch.float64).reshape(2, 4))
    assert torch.equal(got["b"], torch.ones(3)) and got["n"] == 2
    ck.close()
    assert ck._last_walk is None, "close() kept the state's tensors"

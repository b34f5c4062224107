"""Leaves of a state dict that need care (issue 41 items 14, 15, 16): refused by path, or kept as torch keeps them.

Every rank runs every test (tests/python/run-pytest: -n 1 and -n 3).
"""

import collections
import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (scripts/install-deps --with-torch)")

import baton  # noqa: E402  (after the torch check)
from torch.optim import lr_scheduler  # noqa: E402


def _self_list():
    items = [1, 2]
    items.append(items)
    return items


def _self_dict():
    d = {"a": 1}
    d["me"] = d
    return d


class _HoldsItself:
    def state_dict(self):
        return {"me": self}

    def load_state_dict(self, state):
        pass


UNKEEPABLE = {
    "sparse": (lambda: torch.eye(3).to_sparse(), "'x/t': a torch.sparse_coo tensor has no dense bytes"),
    "meta": (lambda: torch.empty(3, device="meta"), "'x/t': a meta tensor holds no data"),
    "nested": (lambda: torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)]),
               "'x/t': a nested (ragged) tensor has no single shape"),
    "self-list": (_self_list, "'x/t/2': the list holds itself"),
    "self-dict": (_self_dict, "'x/t/me': the dict holds itself"),
    "self-object": (_HoldsItself, "'x/t/me': the _HoldsItself holds itself"),
}


@pytest.mark.parametrize("what", sorted(UNKEEPABLE))
def test_unkeepable_tensors_and_cycles_are_type_errors_naming_the_path(rt, shared_dir, what):
    """Item 14: a TypeError naming the path, at save and at restore, on every rank, nothing saved."""
    make, text = UNKEEPABLE[what]
    state = {"ok": torch.zeros(2), "x": {"t": make()}}
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    with pytest.raises(TypeError) as e:
        ck.save(state, 1)
    assert text in str(e.value), str(e.value)
    with pytest.raises(TypeError) as e:
        ck.restore(state)
    assert text in str(e.value), str(e.value)
    assert ck.read_metadata() is None
    ck.close()


class _Refuses:
    def __init__(self):
        self.n = 1

    def state_dict(self):
        return {"n": self.n}

    def load_state_dict(self, state):
        baton._baton._parse_dtype("f17")  # a baton.InvalidArgument of the extension's, with its attributes


def test_errors_raised_again_keep_their_class_and_attributes(rt, shared_dir):
    """Item 15: code, component, where, message survive the path being added; texts name Python keywords."""
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"obj": _Refuses()}, 1)
    with pytest.raises(baton.InvalidArgument) as e:
        ck.restore({"obj": _Refuses()})
    err = e.value
    assert "'obj': _Refuses.load_state_dict refused the checkpoint's state" in str(err)
    assert err.code == "InvalidArgument" and err.component == "runtime" and "f17" in err.message
    assert "'obj'" in err.message and isinstance(err.where, str)
    with pytest.raises(baton.InvalidArgument) as e:
        ck.restore({"obj": _Refuses()}, step="3")
    assert e.value.code == "InvalidArgument" and e.value.component == "python" and "step='3'" in e.value.message
    ck.close()


def _optimizer():
    return torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1, momentum=0.9)


def _scheduler(name, optim):
    make = {
        "LambdaLR": lambda: lr_scheduler.LambdaLR(optim, lambda e: 0.5 ** e),
        "MultiplicativeLR": lambda: lr_scheduler.MultiplicativeLR(optim, lambda e: 0.9),
        "StepLR": lambda: lr_scheduler.StepLR(optim, 2),
        "MultiStepLR": lambda: lr_scheduler.MultiStepLR(optim, [1, 3, 3]),
        "ConstantLR": lambda: lr_scheduler.ConstantLR(optim),
        "LinearLR": lambda: lr_scheduler.LinearLR(optim),
        "ExponentialLR": lambda: lr_scheduler.ExponentialLR(optim, 0.9),
        "SequentialLR": lambda: lr_scheduler.SequentialLR(
            optim, [lr_scheduler.ConstantLR(optim), lr_scheduler.ExponentialLR(optim, 0.9)], milestones=[2]),
        "PolynomialLR": lambda: lr_scheduler.PolynomialLR(optim),
        "CosineAnnealingLR": lambda: lr_scheduler.CosineAnnealingLR(optim, 5),
        "ChainedScheduler": lambda: lr_scheduler.ChainedScheduler(
            [lr_scheduler.StepLR(optim, 2), lr_scheduler.ExponentialLR(optim, 0.9)]),
        "ReduceLROnPlateau": lambda: lr_scheduler.ReduceLROnPlateau(optim),
        "CyclicLR": lambda: lr_scheduler.CyclicLR(optim, 0.01, 0.1),
        "CosineAnnealingWarmRestarts": lambda: lr_scheduler.CosineAnnealingWarmRestarts(optim, 2),
        "OneCycleLR": lambda: lr_scheduler.OneCycleLR(optim, 0.1, total_steps=20),
    }
    return make[name]()


SCHEDULERS = sorted(n for n, c in vars(lr_scheduler).items()
                    if inspect.isclass(c) and (issubclass(c, lr_scheduler.LRScheduler) or n == "ReduceLROnPlateau")
                    and not n.startswith("_") and n != "LRScheduler" and c.__module__ == lr_scheduler.__name__)


def test_the_scheduler_list_is_torchs_own():
    assert {"OneCycleLR", "MultiStepLR", "LambdaLR", "ReduceLROnPlateau", "SequentialLR"} <= set(SCHEDULERS)


@pytest.mark.parametrize("name", SCHEDULERS)
def test_every_torch_scheduler_is_kept(rt, shared_dir, name):
    """Item 16: each scheduler of torch.optim.lr_scheduler round-trips (OneCycleLR, MultiStepLR's Counter)."""
    optim = _optimizer()
    sched = _scheduler(name, optim)
    for _ in range(3):
        optim.step()
        sched.step(1.0) if name == "ReduceLROnPlateau" else sched.step()
    want = sched.state_dict()
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save({"optim": optim, "sched": sched}, 3)
    optim2 = _optimizer()
    sched2 = _scheduler(name, optim2)
    assert ck.restore({"optim": optim2, "sched": sched2}) == 3
    got = sched2.state_dict()
    for key, value in want.items():
        if not callable(value):
            assert got[key] == value, (key, got[key], value)
    if name == "MultiStepLR":
        assert type(got["milestones"]) is collections.Counter
    assert optim2.param_groups[0]["lr"] == optim.param_groups[0]["lr"]
    ck.close()


def test_generators_of_the_programs_own_go_back_to_their_rank(rt, shared_dir, rank):
    """Item 16: a DataLoader's torch.Generator and a numpy Generator, as per-rank state."""
    loader = torch.utils.data.DataLoader(list(range(10)), shuffle=True, generator=torch.Generator().manual_seed(rank))
    npgen = np.random.default_rng(100 + rank)
    state = {"loader_rng": baton.GeneratorState(loader.generator), "np_rng": baton.GeneratorState(npgen)}
    ck = baton.Checkpointer(rt, dir=shared_dir, level2=False)
    ck.save(state, 1)
    want_order, want_np = list(loader), npgen.integers(0, 1 << 30, 4)
    loader.generator.manual_seed(999)
    npgen2 = np.random.default_rng(7)
    assert ck.restore({"loader_rng": baton.GeneratorState(loader.generator),
                       "np_rng": baton.GeneratorState(npgen2)}) == 1
    assert [t.tolist() for t in loader] == [t.tolist() for t in want_order]
    assert np.array_equal(npgen2.integers(0, 1 << 30, 4), want_np)
    with pytest.raises(TypeError, match="neither a torch.Generator nor a numpy.random.Generator"):
        baton.GeneratorState(torch.zeros(2))
    ck.close()


MOVED = """
import sys, tempfile, torch, numpy as np, baton
call, how = sys.argv[1], sys.argv[2]
rt = baton.Runtime()
ck = baton.ArrayCheckpointer(rt, dir=tempfile.mkdtemp(), level2=False)
t = torch.arange(1000, dtype=torch.float32)
ck.register_replicated("t", t)
ck.save_async(1)
ck.wait()
if how == "resize_":
    t.resize_(5_000_000)  # new, larger memory; the registered pointer is freed
else:
    t.set_(torch.zeros(1000))  # other memory of the same shape: only the address tells
try:
    if call == "save":
        ck.save(2)
    elif call == "save_async":
        ck.save_async(2)
    elif call == "restore":
        ck.restore()
    else:
        ck.rollback()  # copies save_async(1)'s snapshot into the arrays
except baton.InvalidArgument as e:
    print("refused:", e)
ck.close()
"""


@pytest.mark.parametrize("call,how", [("save", "resize_"), ("save_async", "resize_"), ("restore", "resize_"),
                                      ("rollback", "resize_"), ("save", "set_"), ("restore", "set_")])
def test_a_registered_tensor_whose_storage_moved_is_refused_naming_it(rank, call, how):
    """Issue 41 item 9, issue 46 item 4: checked before every call that reads or writes the arrays (before:
    SIGSEGV in the save's hash; rollback copied into freed memory, exit 139). Its own process: a crash fails only it.
    set_: the same shape at another address, which the check's cheap probe (a tensor's data_ptr() and shape,
    array_view.h's StillAt) must not take for the registered memory."""
    import os
    import subprocess
    import sys
    if rank != 0:
        return  # one process is enough; rank 0 runs it
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PRTE_", "OPAL_"))}
    p = subprocess.run([sys.executable, "-c", MOVED, call, how], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}"
    assert "refused:" in p.stdout and "array 't' moved since it was registered" in p.stdout, p.stdout
    assert f"{call}: array 't'" in p.stdout, p.stdout
    assert "register it again" in p.stdout

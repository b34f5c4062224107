"""baton.Checkpointer's state-dict form without torch: NumPy leaves, the JSON
metadata (exact round trips, no pickle), per-rank state, the two forms.
Run by tests/python/run-pytest under -n 1 and -n 3."""

import ast
import base64
import collections
import json
import math
import os
import pickle
import struct

import numpy as np
import pytest

import baton
import bit_flips  # tests/python/, on pytest's rootdir path


def bits(x):
    return struct.pack("<d", x)


PLAIN = {
    "floats": [0.1, 1 / 3, 1e-300, 5e-324, 1.7976931348623157e308, -0.0, float("inf"), float("-inf")],
    "ints": [0, -1, 2**63 - 1, 2**64 + 5, -(10**30)],
    "tuple": (1, (2.5, "x"), []),
    "list": [None, True, False, "é ü 日本", ""],
    "bytes": b"\x00\xff\x80pickle\n.",
    "int_keys": {0: "a", 1: {"b": 2}},
    "dollar_key": {"$tuple": "not a tag", "$": 1},
    "ordered": collections.OrderedDict([("z", 1), ("a", 2)]),
    "numpy": [np.float32(0.1), np.int64(-3), np.bool_(True), np.uint8(255), np.float16(1.5)],
}


def test_plain_values_round_trip_exactly(rt, shared_dir):
    meta = dict(PLAIN, nan=float("nan"))
    arr = np.arange(10, dtype=np.float64)
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save({"meta": meta, "arr": arr}, 1)
    ck.close()

    back = {k: None for k in meta}
    arr2 = np.zeros(10)
    state = {"meta": back, "arr": arr2}
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    assert ck2.restore(state) == 1
    assert state["meta"] is back  # the program's own dict, updated in place
    assert np.array_equal(arr2, arr)
    assert [bits(x) for x in back["floats"]] == [bits(x) for x in PLAIN["floats"]]
    assert math.isnan(back["nan"])
    assert back["ints"] == PLAIN["ints"] and all(type(i) is int for i in back["ints"])
    assert back["tuple"] == PLAIN["tuple"] and type(back["tuple"]) is tuple and type(back["tuple"][1]) is tuple
    assert type(back["tuple"][2]) is list
    assert back["list"] == PLAIN["list"] and back["bytes"] == PLAIN["bytes"]
    assert back["int_keys"] == PLAIN["int_keys"] and all(type(k) is int for k in back["int_keys"])
    assert back["dollar_key"] == PLAIN["dollar_key"]
    assert type(back["ordered"]) is collections.OrderedDict and list(back["ordered"]) == ["z", "a"]
    for got, want in zip(back["numpy"], PLAIN["numpy"]):
        assert type(got) is type(want) and got == want
    ck2.close()


def test_numpy_leaves_and_sharded_rows(rt, shared_dir, rank, size):
    rows = np.arange(2 * 3, dtype=np.float32).reshape(2, 3) + 100 * rank  # this rank's rows 2r, 2r+1
    table = np.arange(20, dtype=np.int32).reshape(4, 5)
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save({"emb": baton.Sharded(rows, 2 * rank, (2 * size, 3)), "table": table, "u8": np.arange(3, dtype=np.uint8)},
            5)
    md = ck.read_metadata()
    shapes = {a["name"]: (list(a["shape"]), a["replicated"]) for a in md["arrays"]}
    assert shapes["emb"] == ([2 * size, 3], False) and shapes["table"] == ([4, 5], True)
    ck.close()
    rows2, table2, u8 = np.zeros((2, 3), np.float32), np.zeros((4, 5), np.int32), np.zeros(3, np.uint8)
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    assert ck2.restore({"emb": baton.Sharded(rows2, 2 * rank, (2 * size, 3)), "table": table2, "u8": u8}) == 5
    assert np.array_equal(rows2, rows) and np.array_equal(table2, table) and list(u8) == [0, 1, 2]
    ck2.close()


def test_per_rank_state_goes_back_to_its_rank(rt, shared_dir, rank):
    cursor = {"pos": 10 * rank, "seen": [rank]}
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save({"cursor": baton.PerRank(cursor), "job": {"epoch": 3}}, 2)
    ck.close()
    mine = {"pos": -1}
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    assert ck2.restore({"cursor": baton.PerRank(mine), "job": {"epoch": 0}}) == 2
    assert mine == {"pos": 10 * rank, "seen": [rank]}
    ck2.close()


def test_first_run_and_array_form_checkpoints(rt, shared_dir):
    a = np.arange(4, dtype=np.float64)
    ck = baton.Checkpointer(rt, dir=shared_dir)
    assert ck.restore({"a": a}) is None
    # One form per class: registered arrays and a step alone are ArrayCheckpointer's.
    assert not hasattr(ck, "register_replicated")
    with pytest.raises(TypeError, match="ArrayCheckpointer"):
        ck.save(1)
    with pytest.raises(TypeError, match="ArrayCheckpointer"):
        ck.restore()
    ck.close()
    with pytest.raises(TypeError, match="must be a baton.Runtime"):
        baton.Checkpointer(3)
    # A version of the array form is not a state dict: refused, saying so.
    low = baton.ArrayCheckpointer(rt, dir=shared_dir)
    low.register_replicated("a", a)
    low.save(1)
    low.close()
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    with pytest.raises(baton.InvalidArgument, match="was not saved from a state dict"):
        ck2.restore({"a": a})
    ck2.close()


def test_keys_dropped_from_the_state_leave_the_checkpoint(rt, shared_dir):
    a, b = np.ones(3), np.ones(4)
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save({"a": a, "b": b}, 1)
    ck.save({"a": a}, 2)
    names = sorted(x["name"] for x in ck.read_metadata()["arrays"])
    assert names == ["a", "~baton.state_dict"]
    ck.close()


def _evil_pickle(path):
    class Evil:
        def __reduce__(self):
            return (open, (path, "w"))

    return pickle.dumps(Evil())


def _forged_version(rt, shared_dir, blob):
    """A version written through the array form with the state-dict form's marker and a forged blob."""
    low = baton.ArrayCheckpointer(rt, dir=shared_dir)
    low.register_replicated("~baton.state_dict", np.array(1, dtype=np.int64))
    low.register_replicated("a", np.arange(3, dtype=np.float64))
    low.user_blob = blob
    low.save(7)
    low.close()


def test_metadata_is_json_only_never_pickle(rt, shared_dir, rank):
    pwned = os.path.join(shared_dir, "pwned")  # the same on every rank: the blob kept is rank 0's
    a = np.zeros(3)

    # 1. A blob that is a pickle: not JSON, refused; nothing ran.
    _forged_version(rt, os.path.join(shared_dir, "1"), _evil_pickle(pwned))
    ck = baton.Checkpointer(rt, dir=os.path.join(shared_dir, "1"))
    with pytest.raises(baton.InvalidArgument, match="not JSON"):
        ck.restore({"a": a})
    ck.close()

    # 2. A pickle in base64 under $pickle (how the one format keeps a value of DCP's that JSON cannot hold): read
    # only as torch.load(weights_only=True) reads, so the planted __reduce__ is refused, naming the value.
    forged = {"format": "baton.state_dict", "version": 1,
              "tree": {"a": {"$pickle": base64.b64encode(_evil_pickle(pwned)).decode()}}}
    _forged_version(rt, os.path.join(shared_dir, "2"), json.dumps(forged).encode())
    ck = baton.Checkpointer(rt, dir=os.path.join(shared_dir, "2"))
    with pytest.raises(baton.InvalidArgument, match=r"the value at 'a'.*refused to unpickle"):
        ck.restore({"a": a})
    ck.close()

    # 3. An "object" node naming a callable: objects are the program's own,
    # only their load_state_dict is called; the checkpoint names no code.
    forged = {"format": "baton.state_dict", "version": 1,
              "tree": {"a": {"$array": "a", "lib": "numpy", "dtype": "<f8", "shape": [3], "sharded": False},
                       "os": {"$object": "os.system", "module": False, "state": {"cmd": f"touch {pwned}"}}}}
    _forged_version(rt, os.path.join(shared_dir, "3"), json.dumps(forged).encode())
    ck = baton.Checkpointer(rt, dir=os.path.join(shared_dir, "3"))
    # An object's state saved goes into a state dict of it as plain values (the one format: dcp.load's form
    # restores what Checkpointer saved from the object): the type's name is a label, never looked up.
    state = {"a": a, "os": {"cmd": ""}}
    ck.restore(state)
    assert state["os"] == {"cmd": f"touch {pwned}"} and not os.path.exists(pwned)
    ck.close()

    # 4. Pickle bytes as a value come back as bytes, never loaded.
    evil = _evil_pickle(pwned)
    forged = {"format": "baton.state_dict", "version": 1,
              "tree": {"a": {"$array": "a", "lib": "numpy", "dtype": "<f8", "shape": [3], "sharded": False},
                       "note": {"$bytes": base64.b64encode(evil).decode()}}}
    _forged_version(rt, os.path.join(shared_dir, "4"), json.dumps(forged).encode())
    ck = baton.Checkpointer(rt, dir=os.path.join(shared_dir, "4"))
    state = {"a": a, "note": None}
    assert ck.restore(state) == 7
    assert state["note"] == evil and list(a) == [0.0, 1.0, 2.0]
    ck.close()
    assert not os.path.exists(pwned)


def test_the_package_never_imports_a_code_loading_format():
    banned_modules = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib"}
    banned_calls = {"eval", "exec", "compile", "__import__"}
    here = os.path.dirname(baton.__file__)
    for name in sorted(os.listdir(here)):
        if not name.endswith(".py"):
            continue
        tree = ast.parse(open(os.path.join(here, name)).read(), name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not {a.name.split(".")[0] for a in node.names} & banned_modules, (name, node.lineno)
            if isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] not in banned_modules, (name, node.lineno)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in banned_calls, (name, node.lineno)


def test_a_damaged_version_falls_back_to_the_older_one_whole(rt, shared_dir, rank):
    a = np.full(1000, 1234.5678)
    ck = baton.Checkpointer(rt, dir=shared_dir)
    ck.save({"a": a, "note": "one"}, 1)
    a[:] = 8765.4321
    ck.save({"a": a, "note": "two"}, 2)
    ck.close()
    if rank == 0:  # before the restore's first collective call: no rank reads a shard before it
        bit_flips.flip_a_bit_of(shared_dir, 2, np.float64(8765.4321).tobytes() * 4)
    back = np.zeros(1000)
    state = {"a": back, "note": ""}
    ck2 = baton.Checkpointer(rt, dir=shared_dir)
    # Step 2's tensors fail to verify: step 1 is restored whole, its JSON ("one") with its tensors.
    assert ck2.restore(state) == 1
    assert state["note"] == "one" and np.all(back == 1234.5678)
    skipped = ck2.last_restore()["fallbacks"]
    assert [f["step"] for f in skipped] == [2], skipped
    ck2.close()

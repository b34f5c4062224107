"""The pure modules of the package, without MPI (tests/python/pure-modules.sh: one
pytest process, no mpirun, no Runtime): baton.dcp.safe_unpickle (what a checkpoint's
pickles may name and do), baton.latest (the listing), baton.dcp.state_tree (the one format's
tree of a DCP plan and DCP's view of a tree), dtensor_chunks.Reads (the one box intersection),
restore_match (a version taken whole), gc_pause (the collector paused for a call)."""
import gc
import io
import threading
import os
import pickle
import pickletools

import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")
from torch.distributed.checkpoint import FileSystemWriter  # noqa: E402

import baton  # noqa: E402
from baton.dcp import safe_unpickle  # noqa: E402
from baton.dcp import state_tree  # noqa: E402
from baton.restore_match import decode_tree  # noqa: E402
from baton import metadata  # noqa: E402


class Planted:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _dcp_metadata(tmp_path, sd):
    dcp.save(sd, storage_writer=FileSystemWriter(str(tmp_path / "d")), no_dist=True)
    return (tmp_path / "d" / ".metadata").read_bytes()


def test_dcp_metadata_of_every_dtype_reads_back_equal(tmp_path):
    """DCP's own .metadata (protocol 4+, dataclasses, an Enum member, PosixPath): read, and equal to pickle's."""
    sd = {"f32": torch.randn(3, 2), "e4m3": torch.ones(4, dtype=torch.float8_e4m3fn),
          "e5m2": torch.ones(4, dtype=torch.float8_e5m2), "c64": torch.zeros(2, dtype=torch.complex64),
          "c128": torch.zeros(2, dtype=torch.complex128), "bf16": torch.ones(2, dtype=torch.bfloat16),
          "n": {"step": 3, "tag": "x"}}
    data = _dcp_metadata(tmp_path, sd)
    assert any(op.name == "FRAME" for op, _, _ in pickletools.genops(data))  # the protocol torch's unpickler lacks
    got = safe_unpickle.metadata(data, ".metadata")
    want = pickle.loads(data)
    assert got.state_dict_metadata == want.state_dict_metadata and got.storage_data == want.storage_data
    assert got.state_dict_metadata["e5m2"].properties.dtype is torch.float8_e5m2


def _payloads(marker):
    """Pickles that would run code (create `marker`) through each opcode that calls, builds or looks up."""
    out = {"REDUCE (protocol 5)": pickle.dumps(Planted(marker), protocol=5),
           "REDUCE (protocol 2)": pickle.dumps({"a": Planted(marker)}, protocol=2),
           "INST (protocol 0)": b"(S'%s'\nS'w'\ni__builtin__\nopen\n." % marker.encode(),
           "getattr past an Enum": b"\x80\x02ctorch\nSize\nX\x08\x00\x00\x00__init__\x86cbuiltins\ngetattr\n"
                                   b"\x93."}
    # getattr(torch.Size, "__init__") would reach the function's globals; the REDUCE above is of getattr itself.
    out["getattr past an Enum"] = (b"\x80\x02cbuiltins\ngetattr\nctorch\nSize\nX\x08\x00\x00\x00__init__\x86R.")
    # BUILD on a class object (would set attributes of an allowed class for every later use).
    out["BUILD on a class"] = (b"\x80\x02ctorch.distributed.checkpoint.metadata\nMetadata\nN}X\x06\x00\x00\x00__eq__"
                               b"K\x01s\x86b.")
    return out


@pytest.mark.parametrize("case", list(_payloads("m").keys()))
def test_a_planted_pickle_is_refused_naming_the_entry_and_runs_nothing(tmp_path, case):
    marker = str(tmp_path / "code-ran")
    data = _payloads(marker)[case]
    with pytest.raises(baton.InvalidArgument) as info:
        safe_unpickle.metadata(data, "the entry E")
    assert str(info.value).startswith("the entry E: refused to unpickle"), info.value
    assert not os.path.exists(marker)
    from torch.distributed.checkpoint.metadata import Metadata
    assert callable(Metadata.__eq__)  # BUILD set no attribute of the class


def test_a_bytes_entry_loads_as_torch_load_weights_only_would(tmp_path):
    marker = str(tmp_path / "code-ran")
    buf = io.BytesIO()
    torch.save({"ok": 1, "t": torch.arange(3), "evil": Planted(marker)}, buf)
    with pytest.raises(baton.InvalidArgument) as info:
        safe_unpickle.resaved(buf.getvalue(), "x@b")
    assert "x@b: refused to unpickle" in str(info.value) and not os.path.exists(marker)
    buf = io.BytesIO()
    torch.save({"ok": 1, "t": torch.arange(3), "s": "text"}, buf)
    back = torch.load(safe_unpickle.resaved(buf.getvalue(), "x@b"), weights_only=False)
    assert back["ok"] == 1 and torch.equal(back["t"], torch.arange(3)) and back["s"] == "text"


def test_a_metadata_entry_that_is_not_metadata_is_refused():
    with pytest.raises(baton.InvalidArgument, match="not DCP's Metadata"):
        safe_unpickle.metadata(pickle.dumps({"a": 1}), "dcp-metadata")
    with pytest.raises(baton.InvalidArgument, match="refused to unpickle"):
        safe_unpickle.metadata(b"\x80\x05truncated", "dcp-metadata")


def _version(d, seq, step, complete=True):
    v = d / ("v%08d-s%d" % (seq, step))
    v.mkdir()
    if complete:
        (v / "manifest.json").write_text("{}")


def test_latest_answers_from_the_listing_and_creates_nothing(tmp_path):
    assert baton.latest(str(tmp_path / "typo")) is None and not (tmp_path / "typo").exists()
    d = tmp_path / "ck"
    d.mkdir()
    assert baton.latest(str(d)) is None
    (d / ".metadata").write_bytes(b"")  # a DCP checkpoint: no baton version
    assert baton.latest(str(d)) is None
    _version(d, 1, 400)
    _version(d, 2, 300)            # a lower step saved later: the newest version is seq's
    _version(d, 3, 900, False)     # incomplete
    (d / "v0000004-s9").mkdir()    # not the canonical spelling
    before = sorted(os.listdir(d))
    assert baton.latest(str(d)) == 300
    assert sorted(os.listdir(d)) == before


def _chunk(fqn, path, offsets, sizes, shape, shard, dtype=None):
    return state_tree.Chunk(fqn, path, offsets, sizes, shape, dtype or torch.float32, shard)


def test_a_dcp_plan_becomes_the_checkpointers_tree_named_by_one_rule():
    """A whole tensor is named as Checkpointer names the leaf (path keys joined by ':'), a DTensor's box with its
    offsets after '~@'; values are JSON; int path keys make lists; the tree reads back through decode_tree."""
    chunks = [_chunk("model.w", ("model", "w"), (0, 0), (3, 2), (3, 2), False),
              _chunk("model.d", ("model", "d"), (2, 0), (2, 4), (4, 4), True),
              _chunk("model.d", ("model", "d"), (0, 0), (2, 4), (4, 4), True),
              _chunk("groups.0.x", ("groups", 0, "x"), (), (), (), False, torch.int64)]
    values = {("epoch",): 7, ("groups", 0, "lr"): 0.5, ("groups", 1, "lr"): {"$float": "inf"}}
    tree = state_tree.tree_of_plan(chunks, values)
    assert [c.name for c in chunks] == ["model:w", "model:d~@2,0", "model:d~@0,0", "groups:0:x"]
    assert tree["model"]["w"] == {"$array": "model:w", "lib": "torch", "dtype": "float32", "shape": [3, 2],
                                  "sharded": False}
    assert tree["model"]["d"]["dtensor"]["chunks"] == [["model:d~@0,0", [0, 0], [2, 4]], ["model:d~@2,0", [2, 0], [2, 4]]]
    assert isinstance(tree["groups"], list) and tree["groups"][1] == {"lr": {"$float": "inf"}}
    decoded = decode_tree(metadata.loads(metadata.dumps(tree), "the tree"))
    assert decoded["epoch"] == 7 and decoded["groups"][1]["lr"] == float("inf")


def test_the_dcp_view_of_a_tree_flattens_as_dcp_does():
    """dcp_view: DCP's rule (dict keys as str, lists holding a tensor or a dict walked, others one value; an
    object's state in its place), a chunk per box naming its array, planner_data the paths."""
    tree = {"model": {"$object": "Linear", "module": True,
                      "state": {"w": {"$array": "model:w", "lib": "torch", "dtype": "bfloat16", "shape": [2, 3],
                                      "sharded": False}}},
            "optim": {"state": {"$dict": [[0, {"step": {"$array": "optim:state:0:step", "lib": "torch",
                                                         "dtype": "float32", "shape": [], "sharded": False}}]],
                                "ordered": False},
                      "param_groups": [{"lr": 0.1, "params": [0]}]},
            "lrs": [0.1, 0.01], "rng": {"$per_rank": "rng"}, "empty": {}}
    arrays = {"model:w": {"dtype": "bf16", "shape": [2, 3]}, "optim:state:0:step": {"dtype": "f32", "shape": []}}
    view = state_tree.dcp_view(decode_tree(tree), arrays)
    md = view.metadata
    assert sorted(md.state_dict_metadata) == ["lrs", "model.w", "optim.param_groups.0.lr",
                                              "optim.param_groups.0.params", "optim.state.0.step"]
    w = md.state_dict_metadata["model.w"]
    assert w.properties.dtype == torch.bfloat16 and list(w.size) == [2, 3] and len(w.chunks) == 1
    assert md.planner_data["optim.state.0.step"] == ("optim", "state", "0", "step")
    assert view.values == {"lrs": [0.1, 0.01], "optim.param_groups.0.lr": 0.1, "optim.param_groups.0.params": [0]}
    assert set(md.storage_data.values()) == {"model:w", "optim:state:0:step"}
    with pytest.raises(metadata.FormatError, match="not in its arrays"):
        state_tree.dcp_view(decode_tree(tree), {"model:w": arrays["model:w"]})


def test_a_pickled_value_is_read_as_weights_only_reads_it(tmp_path):
    """A value JSON cannot hold is kept as DCP pickled it, under $pickle, and read back by safe_unpickle: a
    torch.Size comes back; a planted __reduce__ is refused naming the value, and runs nothing."""
    buf = io.BytesIO()
    torch.save(torch.Size([2, 3]), buf)
    node = state_tree.encode_value(("s",), torch.Size([2, 3]), lambda: buf.getvalue())
    assert set(node) == {"$pickle"}
    assert decode_tree({"s": node})["s"] == torch.Size([2, 3])
    marker = tmp_path / "ran"
    evil = io.BytesIO()
    torch.save(Planted(str(marker)), evil)
    node = state_tree.encode_value(("e",), Planted(str(marker)), lambda: evil.getvalue())
    with pytest.raises(baton.InvalidArgument, match="the value at 'e'.*refused to unpickle"):
        decode_tree({"e": node})
    assert not marker.exists()


def test_a_version_taken_whole_allocates_what_only_a_live_leaf_could_take():
    """restore_match in WholeVersion's form (Checkpointer.load, `baton ckpt export --format torch`): a DTensor's
    boxes read into one tensor of its global shape, a Sharded array whole, an object's state as its state dict
    with its int keys and OrderedDict _metadata, no per-rank entry; the same tree into another object that lacks
    every key refuses the
    objects, the DTensor and the Sharded (their mesh, their rows) and the per-rank entry, as before."""
    import collections

    from baton.restore_match import WholeVersion, match
    from baton.state_walk import walk

    state = collections.OrderedDict([("w", {"$array": "model:w", "lib": "torch", "dtype": "float32", "shape": [2, 3],
                                            "sharded": False})])
    tree = {"model": {"$object": "Linear", "module": True,
                      "state": {"$dict": [[k, v] for k, v in state.items()], "ordered": True,
                                "meta": {"": {"version": 1}}}},
            "d": {"$array": "d", "lib": "torch", "dtype": "float32", "shape": [4, 3], "sharded": True,
                  "dtensor": {"placements": ["S(0)"], "mesh": [2],
                              "chunks": [["d~@0,0", [0, 0], [2, 3]], ["d~@2,0", [2, 0], [2, 3]]]}},
            "rows": {"$array": "rows", "lib": "torch", "dtype": "int64", "shape": [5], "sharded": True},
            "optim": {"$object": "AdamW", "module": False,
                      "state": {"state": {"$dict": [[0, {"step": 1.0}]], "ordered": False}}},
            "rng": {"$per_rank": "rng"}, "epoch": 3}
    arrays = {"model:w": {"dtype": "f32", "shape": [2, 3]}, "d~@0,0": {"dtype": "f32", "shape": [2, 3]},
              "d~@2,0": {"dtype": "f32", "shape": [2, 3]}, "rows": {"dtype": "i64", "shape": [5]}}
    whole = WholeVersion()
    plan = match(whole, walk(whole), decode_tree(tree), arrays, strict=False)
    assert plan.errors == [] and plan.per_rank == []
    assert sorted(plan.targets) == ["model:w", "rows"] and tuple(plan.targets["rows"][1].shape) == (5,)
    (path, reads, dtype), = plan.dtensors.values()
    assert path == ("d",) and dtype == "f32" and [c.name for c, _, _ in reads.buffers] == ["d~@0,0", "d~@2,0"]
    for action in plan.actions:
        action()
    got = whole.state
    assert sorted(got) == ["d", "epoch", "model", "optim", "rows"] and got["epoch"] == 3
    assert tuple(got["d"].shape) == (4, 3) and got["rows"].dtype == torch.int64
    assert type(got["model"]) is collections.OrderedDict and got["model"]._metadata == {"": {"version": 1}}
    assert list(got["optim"]["state"]) == [0]


    class Holder:  # what WholeVersion is, but for its type: an object that lacks every key
        def state_dict(self):
            return {}

        def load_state_dict(self, state):
            pass

    holder = Holder()
    refused = match(holder, walk(holder), decode_tree(tree), arrays, strict=True).errors
    assert [e.split("'")[1] for e in refused] == ["model", "d", "rows", "optim", "rng"], refused
    assert all("baton cannot create" in refused[i] for i in (1, 2)) and "per-rank" in refused[4], refused


def test_one_box_intersection_reads_boxes_into_a_whole_tensor_and_back():
    """dtensor_chunks.Reads, the one intersection of saved boxes and a live box: two saved row boxes into a whole
    tensor (every row read once), and a tensor saved whole (one box) into the same."""
    from baton.dtensor_chunks import Reads

    live = torch.zeros(4, 3)
    reads = Reads(("t",), [["t~@0,0", [0, 0], [2, 3]], ["t~@2,0", [2, 0], [2, 3]]], live)
    assert [(c.name, first, tuple(buf.shape)) for c, buf, first in reads.buffers] == [
        ("t~@0,0", 0, (2, 3)), ("t~@2,0", 0, (2, 3))]
    for c, buf, _ in reads.buffers:
        buf.copy_(torch.arange(6.0).reshape(2, 3) + 10 * c.offsets[0])
    reads.copy()
    assert torch.equal(live, torch.cat([torch.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3) + 20]))
    whole = Reads(("t",), [["t", [0, 0], [4, 3]]], torch.zeros(4, 3))
    assert [(c.name, first, tuple(buf.shape)) for c, buf, first in whole.buffers] == [("t", 0, (4, 3))]


def test_a_shard_off_the_host_is_read_through_host_buffers_that_copy_moves():
    """dtensor_chunks.Reads.into_local reads a saved box straight into the live shard only where the shard is host
    memory. The extension writes host memory: a shard on another device (a GPU's; the meta device stands for one
    here, where no machine has a GPU) registered in place was read into the host mirror tensors.Binding makes of
    it, and copy(), which leaves the boxes read in place, never moved those bytes into the shard."""
    from baton.dtensor_chunks import Reads

    saved = [["t~@0,0", [0, 0], [2, 3]], ["t~@2,0", [2, 0], [2, 3]]]
    host_shard = torch.zeros(4, 3)
    host = Reads(("t",), saved, host_shard)
    host.into_local()
    assert host.in_place == {0, 1} and not host.holds_scratch()
    assert [buf.data_ptr() for _, buf, _ in host.buffers] == [host_shard.data_ptr(), host_shard[2:].data_ptr()]

    other = Reads(("t",), saved, torch.zeros(4, 3, device="meta"))
    other.into_local()
    assert other.in_place == set() and other.holds_scratch()
    assert [(buf.device.type, tuple(buf.shape)) for _, buf, _ in other.buffers] == [("cpu", (2, 3)), ("cpu", (2, 3))]
    other.copy()  # host buffers into the shard's device (a no-op copy on meta; a host-to-device copy on a GPU)

    # The buffers and the tensors a restore allocates are host memory under any default device too (before:
    # torch.set_default_device("cuda") put them on the GPU, where the extension cannot write).
    from baton import tensors
    with torch.device("meta"):
        assert torch.empty(1).device.type == "meta"
        under = Reads(("t",), saved, torch.zeros(4, 3, device="meta"))
        assert [buf.device.type for _, buf, _ in under.buffers] == ["cpu", "cpu"]
        assert [tensors.allocate("torch", "float32", [2], ("t",), zeroed=z).device.type for z in (True, False)] == [
            "cpu", "cpu"]


def test_the_agreed_document_reuses_the_arrays_part_only_for_the_same_items():
    """Issue 48: LocalPlan.agreed_json, the bytes the ranks' plan digests are of, holds agreed(call) and the
    fields after it (parsed back, equal), and the digest is their SHA-256. Its arrays' part (sorted, encoded and
    hashed: 3.7 ms of a 5,000-tensor save_async call) is the previous walk's where the walk took every item
    from it, and made anew where a leaf changed, one was added or one was dropped."""
    import hashlib

    from baton import metadata
    from baton.state_walk import walk

    def check(plan, call):
        data, digest = plan.agreed_json(call, reopen=False)
        assert metadata.loads(data, "the document") == {**plan.agreed(call), "reopen": False}
        assert digest == hashlib.sha256(data).digest()
        return data

    state = {"w": torch.arange(6.0), "b": torch.zeros(3), "n": 1}
    first = walk(state)
    check(first, ["save", 1])
    second = walk(state, previous=first)
    assert second._arrays_head is first._arrays_head is not None
    assert check(second, ["save", 2]) != check(first, ["save", 1])  # the call is in it
    for change in (lambda: state.update(b=torch.zeros(4)), lambda: state.update(x=torch.zeros(1)),
                   lambda: state.pop("w")):
        change()
        before = second
        second = walk(state, previous=before)
        assert second._arrays_head is None
        check(second, ["save", 3])
        assert second._arrays_head is not before._arrays_head
    assert sorted(a[0] for a in metadata.loads(check(second, ["save", 4]), "the document")["arrays"]) == ["b", "x"]


def test_the_cached_read_pieces_follow_the_boxes():
    """dtensor_chunks caches the pieces of a read by the saved boxes, the global shape and the rank's box alone:
    another box, another split or another shape gets pieces of its own, equal to DCP's helper uncached."""
    from baton import dtensor_chunks

    saved = (((0, 0), (2, 3)), ((2, 0), (2, 3)))
    cases = [((4, 3), saved, ((4, 3), (0, 0))), ((4, 3), saved, ((1, 3), (1, 0))), ((4, 3), saved, ((2, 2), (1, 1))),
             ((4, 3), (((0, 0), (1, 3)), ((1, 0), (3, 3))), ((4, 3), (0, 0))),
             ((5, 3), (((0, 0), (2, 3)), ((2, 0), (3, 3))), ((5, 3), (0, 0)))]

    def fields(result):
        pieces, spans, covered = result
        return [(p.index, p.dest_offsets, p.storage_offsets, p.lengths) for p in pieces], spans, covered

    got = [fields(dtensor_chunks._pieces(*c)) for c in cases]
    assert got == [fields(dtensor_chunks._pieces.__wrapped__(*c)) for c in cases]
    assert len({repr(g) for g in got}) == len(cases)
    assert got[1] == ([(0, (0, 0), (1, 0), (1, 3))], {0: (1, 2)}, 3)


def test_the_differences_of_a_rank_local_step_name_the_failing_rank():
    """Checkpointer._agree_local_step's documents ({"call", "error"}, no plan): with one rank failed and two
    planned, the ranks' differences name the failure; they raised KeyError ('arrays') at 3 ranks before."""
    from baton.plan_agreement import differences

    ok = {"call": ["restore", "first run"], "error": None}
    docs = [ok, {"call": ["restore", "first run"], "error": "InvalidArgument: holds 'epoch3.pt'"}, dict(ok)]
    assert differences(docs) == ["rank 1 could not make the plan: InvalidArgument: holds 'epoch3.pt'"]


def test_names_remembered_by_path_never_answer_an_equal_key_of_another_type():
    """names.by_path (array names and path texts, remembered across saves): 1 == True == 1.0 as keys, but each
    path keeps its own name, in either order of first use; an unhashable key is named, not remembered; at
    the limit the remembered paths are forgotten (bounded memory)."""
    from baton import names
    from baton.metadata import path_text

    first = [names.array_name(("s", 1)), names.array_name(("s", True)), names.array_name(("s", 1.0))]
    again = [names.array_name(("s", 1.0)), names.array_name(("s", True)), names.array_name(("s", 1))]
    assert first == ["s:1", "s:True", "s:1.0"] and again == first[::-1]
    assert [path_text(("t", True)), path_text(("t", 1)), path_text(("t", True))] == ["t/True", "t/1", "t/True"]
    made = []
    counted = names.by_path(lambda path: made.append(path) or "/".join(map(str, path)), limit=2)
    assert [counted(("a",)), counted(("a",)), counted(("b", 0)), counted(("c",)), counted(("c",)),
            counted(("a",))] == ["a", "a", "b/0", "c", "c", "a"]
    assert made == [("a",), ("b", 0), ("c",), ("a",)]  # ("c",) found both taken: they were forgotten
    assert counted(("d", [1])) == "d/[1]" and counted(("d", [1])) == "d/[1]"  # unhashable: made each time


def test_the_collector_is_paused_by_the_outermost_call_and_left_as_found():
    """gc_pause: nested and overlapping calls re-enable the collector once, at the end of the last; a program's
    own gc.disable() before the call is kept; an exception ends the pause too."""
    from baton.gc_pause import paused, pausing

    assert gc.isenabled()
    with paused():
        assert not gc.isenabled()
        with paused():
            assert not gc.isenabled()
        assert not gc.isenabled(), "the inner call re-enabled it under the outer"
    assert gc.isenabled()
    with pytest.raises(KeyError):
        with paused():
            raise KeyError("x")
    assert gc.isenabled()
    gc.disable()
    try:
        with paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    # Two threads: the one that ends first leaves it paused for the other.
    inside, release, seen = threading.Event(), threading.Event(), []

    @pausing
    def long_call():
        inside.set()
        release.wait(10)
        seen.append(gc.isenabled())

    t = threading.Thread(target=long_call)
    t.start()
    assert inside.wait(10)
    with paused():
        pass
    assert not gc.isenabled(), "a shorter overlapping call re-enabled it under the longer"
    release.set()
    t.join(10)
    assert seen == [False] and gc.isenabled()

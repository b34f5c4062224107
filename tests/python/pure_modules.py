"""The pure modules of the package, without MPI (tests/python/pure-modules.sh: one
pytest process, no mpirun, no Runtime): baton.dcp.safe_unpickle (what a checkpoint's
pickles may name and do), baton.latest (the listing), baton.dcp.names."""
import io
import os
import pickle
import pickletools

import pytest

torch = pytest.importorskip("torch")
dcp = pytest.importorskip("torch.distributed.checkpoint")
from torch.distributed.checkpoint import FileSystemWriter  # noqa: E402

import baton  # noqa: E402
from baton.dcp import safe_unpickle  # noqa: E402
from baton.dcp import names  # noqa: E402


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


def test_chunk_names_are_one_rule_and_fit_hdf5():
    assert names.chunk_name("model.w", (0, 4)) == "model.w@0,4"
    assert names.chunk_name("a/b", None) == "a%2Fb@b"
    assert names.chunk_name(".hidden", (0,)) == "%2Ehidden@0"
    long = names.chunk_name("x" * 400, (0,))
    assert len(long.encode()) <= 255 and long.endswith("@0") and "#" in long

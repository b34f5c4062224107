"""baton.metadata, the JSON codec of a state dict's non-array leaves, without MPI
(tests/python/metadata-codec.sh: one pytest process, no mpirun, no Runtime, no torch):
exact round trips, the format on disk, what it refuses at save (naming the path), and
hostile blobs, which end in a FormatError naming where, never in another exception."""
import collections
import math
import random
import struct

import numpy as np
import pytest

from baton import metadata
from baton.metadata import FormatError


def no_other(value, path):
    raise metadata.unkeepable(path, value)


def no_tag(tag, node, path):
    raise FormatError(f"'{metadata.path_text(path)}': unknown tag {tag!r}")


def round_trip(value):
    blob = metadata.dumps(metadata.encode(value, (), no_other))
    return metadata.decode(metadata.loads(blob, "the blob"), (), no_tag)


def same(a, b):
    """Equal in type and value, floats by their bits (NaN, -0.0), containers in order."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b) and [type(k) for k in a] == [type(k) for k in b]
        for k in a:
            same(a[k], b[k])
        assert hasattr(a, "_metadata") == hasattr(b, "_metadata")
        if hasattr(a, "_metadata"):
            same(a._metadata, b._metadata)
    elif isinstance(a, (float, np.floating)):
        assert struct.pack("<d", float(a)) == struct.pack("<d", float(b)) or (math.isnan(a) and math.isnan(b))
    else:
        assert a == b


def test_every_plain_value_round_trips_with_its_type_and_bits():
    sd = collections.OrderedDict([("z", 1), ("a", 2)])
    sd._metadata = collections.OrderedDict([("", {"version": 1}), ("layer", {"version": 2})])
    value = {
        "floats": [0.1, 1 / 3, 5e-324, 1.7976931348623157e308, -0.0, math.inf, -math.inf, math.nan],
        "ints": [0, -1, 2**63 - 1, 2**64 + 5, -(10**30), 10**4299],
        "strs": ["", "é ü 日本", "$tuple", "\x00", "\udcff"],
        "singletons": [None, True, False],
        "bytes": [b"", b"\x00\xff\x80pickle\n.", bytes(range(256))],
        "tuples": ((), (1,), (1, (2.5, "x"), [], {"k": ()})),
        "keys": {0: "int", -7: "neg", 1.5: "float", -0.0: "neg zero", True: "bool", None: "none",
                 "s": "str", "$dict": "dollar", "": "empty", 2**70: "big"},
        "dollar_keys": {"$tuple": "not a tag", "$": 1},
        "ordered": sd,
        "counter": collections.Counter({30: 1, 80: 2}),
        "numpy": [np.float32(0.1), np.float64(-0.0), np.float16(np.inf), np.float32(np.nan), np.int8(-128),
                  np.int64(-3), np.uint64(2**64 - 1), np.uint8(255), np.bool_(True)],
        "empty": [{}, [], collections.OrderedDict()],
    }
    same(round_trip(value), value)


def test_the_tags_on_disk_are_as_documented():
    """The bytes a checkpoint holds: changing them would orphan every saved version."""
    enc = metadata.encode({"t": (1, b"\x00"), "f": [math.nan, math.inf, -math.inf], "k": {1: None},
                           "n": np.float32(0.5), "p": {"a": 1}}, (), no_other)
    assert enc == {"t": {"$tuple": [1, {"$bytes": "AA=="}]},
                   "f": [{"$float": "nan"}, {"$float": "inf"}, {"$float": "-inf"}],
                   "k": {"$dict": [[1, None]], "ordered": False},
                   "n": {"$numpy": "<f4", "value": 0.5}, "p": {"a": 1}}
    assert metadata.dumps({"a": "é", "b": [1.5]}) == '{"a":"é","b":[1.5]}'.encode("utf-8")


def test_a_string_without_utf8_form_round_trips_escaped():
    """os.fsdecode's name of a file that is not UTF-8 (a lone surrogate) as a value and as a key."""
    value = {"name": "caf\udce9.bin", "\udcff": 1, "plain": "é"}
    blob = metadata.dumps(metadata.encode(value, (), no_other))
    assert blob.isascii() and b"\\udce9" in blob
    same(round_trip(value), value)


def test_other_values_go_to_on_other_with_their_path():
    seen = []

    def on_other(value, path):
        seen.append((value, path))
        return {"$array": "x"}

    marker = object()
    assert metadata.encode({"a": [1, (2, marker)]}, ("root",), on_other) == \
        {"a": [1, {"$tuple": [2, {"$array": "x"}]}]}
    assert seen == [(marker, ("root", "a", 1, 1))]


def refusal(value, path=("state",)):
    with pytest.raises(TypeError) as info:
        metadata.encode(value, path, no_other)
    return str(info.value)


@pytest.mark.parametrize("value, where, why", [
    ({"a": [1, lambda: 0]}, "'state/a/1'", "builtins.function"),
    ({(1, 2): 0}, "'state/(1, 2)'", "a dict key must be"),
    ({math.nan: 0}, "'state/nan'", "finite float"),
    ({"x": {frozenset(): 0}}, "'state/x/frozenset()'", "a dict key must be"),
    ({"c": np.complex64(1j)}, "'state/c'", "NumPy scalar of dtype complex64"),
    ({"d": np.datetime64(1, "s")}, "'state/d'", "numpy.datetime64"),
    ({"l": np.longdouble(1) / 3}, "'state/l'", "wider than the double"),
    ({"big": -(10**4300)}, "'state/big'", "more than 4300 decimal digits"),
    ({10**4300: 0}, "'state/<an int of 14285 bits>'", "more than 4300 decimal digits"),
    ({"s": {1, 2}}, "'state/s'", "builtins.set"),
    ({"dd": collections.defaultdict(int)}, "'state/dd'", "collections.defaultdict"),
])
def test_what_json_cannot_carry_is_refused_naming_its_path(value, where, why):
    text = refusal(value)
    assert text.startswith("baton: cannot keep " + where) and why in text, text
    assert "never use pickle" in text


def test_a_container_that_holds_itself_is_refused_naming_it():
    loop = [1]
    loop.append(loop)
    assert "'state/1': the list holds itself" in refusal(loop)
    d = {"a": {}}
    d["a"]["b"] = d
    assert "'state/a/b': the dict holds itself" in refusal(d)
    shared = [1]  # the same list twice is not a cycle
    assert metadata.encode([shared, shared], (), no_other) == [[1], [1]]


def nested(depth, leaf=0):
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_is_bounded_at_save_naming_the_path():
    limit = metadata.MAX_DEPTH
    assert round_trip(nested(limit)) == nested(limit)
    text = refusal(nested(5000), ())
    assert text.startswith("baton: cannot keep '" + "/".join(["0"] * limit) + "'")
    assert f"nested deeper than {limit} levels" in text
    # The bound holds through tuples and tagged dicts, whose JSON is deeper than the path.
    t = 0
    for _ in range(limit):
        t = {1: (t,)}
    with pytest.raises(TypeError, match="nested deeper than"):
        metadata.encode(t, (), no_other)


def bad_blob(blob):
    with pytest.raises(FormatError) as info:
        metadata.decode(metadata.loads(blob, "rank 2's blob"), ("root",), no_tag)
    return str(info.value)


HOSTILE = [
    (b"\xff\xfe", "rank 2's blob is not JSON"),
    (b"\x80\x04K\x01.", "rank 2's blob is not JSON"),  # a pickle
    (b'{"a": 1', "rank 2's blob is not JSON"),
    (b"[NaN]", "rank 2's blob: JSON constant NaN"),
    (b'{"a": -Infinity}', "rank 2's blob: JSON constant -Infinity"),
    (b"[1e400]", "rank 2's blob: JSON number 1e400 is past a double's range"),
    (b'{"$dict": [[-1e999, 0]]}', "past a double's range"),
    (b"9" * 5000, "rank 2's blob is not JSON (Exceeds the limit (4300 digits)"),
    (b"[" * 100000 + b"]" * 100000, "rank 2's blob: JSON nested deeper"),
    (b"[" * 500 + b"]" * 500, "containers nested deeper than 100 levels"),
    (b'{"a": {"$pickle": "gASVAA=="}}', "'root/a': unknown tag '$pickle'"),
    (b'{"$tuple": [1], "$bytes": "AA=="}', "'root': an object with two tags"),
    (b'{"$float": "nan", "x": 1}', "'root': $float with other keys ['x']"),
    (b'{"$tuple": {"a": 1}}', "'root': malformed $tuple"),
    (b'{"$float": "1.5"}', "'root': malformed $float '1.5'"),
    (b'{"$float": 1}', "'root': malformed $float 1"),
    (b'{"$bytes": "!!"}', "'root': malformed $bytes: "),
    (b'{"$bytes": 3}', "'root': malformed $bytes 3"),
    (b'{"$dict": {"a": 1}}', "'root': malformed $dict"),
    (b'{"$dict": [[[1], 2]]}', "'root': malformed $dict entry [[1], 2]"),
    (b'{"$dict": [[1, 2, 3]]}', "'root': malformed $dict entry"),
    (b'{"$dict": [], "ordered": "yes"}', "'root': $dict with ordered 'yes' (a bool)"),
    (b'{"x": [{"$numpy": "<i8"}]}', "'root/x/0': $numpy of dtype int64 with value None"),
    (b'{"$numpy": "<i8", "value": 1e30}', "$numpy of dtype int64 with value 1e+30"),
    (b'{"$numpy": "<i8", "value": 1000000000000000000000}', "'root': $numpy of dtype int64"),
    (b'{"$numpy": "<u1", "value": -1}', "'root': $numpy of dtype uint8 with value -1"),
    (b'{"$numpy": "|b1", "value": 2}', "$numpy of dtype bool with value 2"),
    (b'{"$numpy": "<f8", "value": [1, 2]}', "$numpy of dtype float64 with value [1, 2]"),
    (b'{"$numpy": "<f8", "value": "1.5"}', "$numpy of dtype float64 with value '1.5'"),
    (b'{"$numpy": "<f8", "value": {"$tuple": [1]}}', "$numpy of dtype float64 with value"),
    (b'{"$numpy": "O", "value": 1}', "'root': $numpy of dtype object (only numbers are kept)"),
    (b'{"$numpy": "<M8[s]", "value": 1}', "$numpy of dtype datetime64[s] (only numbers are kept)"),
    (b'{"$numpy": "no such", "value": 1}', "'root': $numpy dtype: "),
    (b'{"$numpy": 8, "value": 1}', "'root': malformed $numpy 8"),
]


@pytest.mark.parametrize("blob, text", [pytest.param(b, t, id=f"{i}: {t[:40]}") for i, (b, t) in enumerate(HOSTILE)])
def test_a_hostile_blob_is_a_format_error_naming_where(blob, text):
    got = bad_blob(blob)
    assert text in got, got


def test_decode_refuses_what_json_loads_never_gives():
    with pytest.raises(FormatError, match="'root/a': unexpected JSON value"):
        metadata.decode({"a": {1, 2}}, ("root",), no_tag)


def test_a_numpy_nan_and_its_bounds_read_back():
    assert math.isnan(metadata.decode({"$numpy": "<f2", "value": {"$float": "nan"}}, (), no_tag))
    assert metadata.decode({"$numpy": "<u8", "value": 2**64 - 1}, (), no_tag) == np.uint64(2**64 - 1)
    assert metadata.decode({"$numpy": "<i1", "value": -128}, (), no_tag) == np.int8(-128)


def test_mangled_blobs_give_a_value_or_a_format_error_only():
    """20000 seeded mutations of a real blob: flipped, deleted, inserted and duplicated bytes."""
    value = {"a": (1, 2.5, b"xy", None), "k": {1: [True, "s"], 2.5: np.int16(7)}, "c": collections.Counter(a=2),
             "f": [math.nan, -math.inf], "n": nested(20)}
    blob = metadata.dumps(metadata.encode(value, (), no_other))
    rng = random.Random(46)
    alphabet = b'[]{}",:$0123456789.eE+-tfnul\\ ' + bytes(range(256))
    outcomes = collections.Counter()
    for _ in range(20000):
        b = bytearray(blob)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(b))
            op = rng.randrange(4)
            if op == 0:
                b[i] = rng.choice(alphabet)
            elif op == 1:
                del b[i]
            elif op == 2:
                b.insert(i, rng.choice(alphabet))
            else:
                j = rng.randrange(len(b))
                b[i:i] = b[min(i, j):max(i, j)][:64]
        try:
            metadata.decode(metadata.loads(bytes(b), "blob"), (), no_tag)
            outcomes["read"] += 1
        except FormatError:
            outcomes["refused"] += 1
    assert outcomes["read"] > 0 and outcomes["refused"] > 0, outcomes

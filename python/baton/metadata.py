"""The JSON form of a state dict's non-array leaves (job-wide metadata).

A checkpoint must not be able to run code when it is loaded, so nothing here
uses pickle: the values a state dict keeps besides its arrays (numbers,
strings, bools, None, bytes, lists, tuples, dicts, NumPy scalars) are written
as JSON and read back with ``json.loads`` alone. JSON has no tuples, no
bytes, no non-string keys and no NaN, so those travel as small tagged objects
whose only key starts with ``$`` (a dict whose own keys start with ``$`` is
tagged too, so a user's key can never pass for a tag). A tag this module does
not know is an error, never an extension point.

Floats round-trip exactly: Python writes the shortest repr that reads back
to the same double; NaN and the infinities are tagged (a NaN's payload bits
are not kept).

What ``json`` itself cannot carry is refused at save, naming the path, rather
than failing later inside ``json.dumps`` with no path: a container nested
deeper than MAX_DEPTH, an int of more decimal digits than Python reads back
by default, a NumPy scalar wider than a double. What a hostile blob could
make ``loads``/``decode`` do beyond that is a FormatError, never another
exception: nesting past the same bound, a number past a double's range, a
tagged object with other keys than its tag's.
"""

import base64
import collections
import json
import math
import sys
import warnings

from baton.names import by_path

try:  # once, not at every leaf encode meets that is not a plain value
    import numpy as _NUMPY_MODULE
except ImportError:  # pragma: no cover - numpy is a dependency of the extension
    _NUMPY_MODULE = None

# The tags, each an object with exactly these keys.
_TUPLE = "$tuple"      # {"$tuple": [items]}
_DICT = "$dict"        # {"$dict": [[key, value], ...], "ordered": bool, "counter": bool | absent,
#                        "meta": <_metadata> | absent}
_FLOAT = "$float"      # {"$float": "nan" | "inf" | "-inf"}
_BYTES = "$bytes"      # {"$bytes": "<base64>"}
_NUMPY = "$numpy"      # {"$numpy": "<dtype str>", "value": <int|float|bool>}
ARRAY = "$array"       # a reference to a baton array (state_walk.PlanItem.ref; restore_match.ArrayNode)
OBJECT = "$object"     # an object walked through state_dict() (state_walk.walk; restore_match.ObjectNode)
PER_RANK = "$per_rank"  # a per-rank entry (state_walk.walk; restore_match.PerRankNode)
PICKLE = "$pickle"      # {"$pickle": "<base64>"}: a value JSON cannot hold, as torch.save pickles it (a DCP
#                         bytes entry: baton.dcp.state_tree; `baton ckpt import`: state_walk.walk(pickled=));
#                         read back only by baton.dcp.safe_unpickle, what torch.load(weights_only=True) reads

_KEY_TYPES = (str, int, float, bool, type(None))
# The other keys each tag's object may hold (the tag itself aside).
_TAG_KEYS = {_TUPLE: (), _DICT: ("ordered", "counter", "meta"), _FLOAT: (), _BYTES: (), _NUMPY: ("value",)}

# Containers deeper than this are refused (encode) or a FormatError (decode): the
# Python recursion of encode/decode and json's own stay far below the interpreter's
# limit (1000), however deep the caller's stack. A state dict is a few levels deep.
MAX_DEPTH = 100
# json.loads reads an int of at most this many decimal digits (Python >= 3.11's
# default bound, sys.set_int_max_str_digits); a longer one would save and never load.
_INT_DIGITS = getattr(sys.int_info, "default_max_str_digits", 4300) or 4300
_INT_BOUND = 10 ** _INT_DIGITS


@by_path  # every leaf's, at every save's agreement (state_walk.PlanItem.agreed)
def path_text(path):
    """The path of a leaf as an error message shows it: keys joined by '/'."""
    return "/".join(_key_text(k) for k in path) if path else "<the state dict>"


def _key_text(key):
    # str() of an int past Python's digit limit raises: the message must not.
    if type(key) is int and key.bit_length() > 3 * _INT_DIGITS:
        return f"<an int of {key.bit_length()} bits>"
    return str(key)


def unkeepable(path, value, why=None):
    """The TypeError for a leaf that cannot be kept, naming its path."""
    kind = type(value).__module__ + "." + type(value).__qualname__
    text = (f"baton: cannot keep '{path_text(path)}': a {kind} is neither a tensor, a NumPy array, "
            "an object with state_dict()/load_state_dict(), nor a value JSON can carry (None, bool, "
            "int, float, str, bytes, list, tuple, dict, NumPy scalar); checkpoints never use pickle")
    if why:
        text += f" ({why})"
    return TypeError(text)


def pickled_node(raw):
    """The ``PICKLE`` node of ``raw``, the bytes torch.save wrote of a value (never read but by safe_unpickle)."""
    return {PICKLE: base64.b64encode(bytes(raw)).decode("ascii")}


def encode(value, path, on_other, _open=None):
    """The JSON-able form of ``value`` (found at ``path``).

    ``on_other(value, path)`` encodes what is not a plain value (arrays,
    objects; it returns the node or raises); plain containers are walked
    here. Raises TypeError naming the path for what cannot be kept, a
    container that holds itself included (``_open``: the ids of the
    containers being encoded, around this one).
    """
    t = type(value)
    if t is list or t is tuple or t is dict or t is collections.OrderedDict or t is collections.Counter:
        if len(path) >= MAX_DEPTH:
            raise TypeError(f"baton: cannot keep '{path_text(path)}': containers nested deeper than "
                            f"{MAX_DEPTH} levels")
        _open = set() if _open is None else _open
        if id(value) in _open:
            raise TypeError(f"baton: cannot keep '{path_text(path)}': the {t.__name__} holds itself "
                            "(JSON has no cycles)")
        _open.add(id(value))
        try:
            return _encode_container(value, t, path, on_other, _open)
        finally:
            _open.discard(id(value))
    if value is None or t is bool or t is str:
        return value
    if t is int:
        _check_int(value, path)
        return value
    if t is float:
        if math.isfinite(value):
            return value
        return {_FLOAT: "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if t is bytes:
        return {_BYTES: base64.b64encode(value).decode("ascii")}
    numpy_scalar = _numpy_scalar(value, path)
    if numpy_scalar is not None:
        return numpy_scalar
    return on_other(value, path)


def _check_int(value, path):
    # bit_length first: the comparison with the bound is only for ints near it.
    if value.bit_length() > 3 * _INT_DIGITS and abs(value) >= _INT_BOUND:
        raise unkeepable(path, value, f"an int of more than {_INT_DIGITS} decimal digits, "
                                      "which Python's JSON reader refuses")


def _encode_container(value, t, path, on_other, _open):
    if t is list:
        return [encode(v, path + (i,), on_other, _open) for i, v in enumerate(value)]
    if t is tuple:
        return {_TUPLE: [encode(v, path + (i,), on_other, _open) for i, v in enumerate(value)]}
    return _encode_dict(value, path, on_other, _open)


def _encode_dict(value, path, on_other, _open):
    meta = getattr(value, "_metadata", None)
    plain = (type(value) is dict and meta is None and
             all(type(k) is str and not k.startswith("$") for k in value))
    if plain:
        return {k: encode(v, path + (k,), on_other, _open) for k, v in value.items()}
    for k in value:
        if type(k) not in _KEY_TYPES or (type(k) is float and not math.isfinite(k)):
            raise unkeepable(path + (k,), k, "a dict key must be a str, int, finite float, bool or None")
        if type(k) is int:
            _check_int(k, path + (k,))
    tagged = {_DICT: [[k, encode(v, path + (k,), on_other, _open)] for k, v in value.items()],
              "ordered": type(value) is collections.OrderedDict}
    if type(value) is collections.Counter:
        tagged["counter"] = True  # MultiStepLR's milestones
    if meta is not None:
        # torch.nn.Module.state_dict() hangs per-submodule versions here;
        # load_state_dict reads them to convert older layouts.
        tagged["meta"] = encode(meta, path + ("_metadata",), on_other, _open)
    return tagged


def _numpy_scalar(value, path):
    np = _numpy()
    if np is None or not isinstance(value, np.generic):
        return None
    if value.dtype.kind not in "biuf":
        raise unkeepable(path, value, f"NumPy scalar of dtype {value.dtype}")
    item = value.item()
    if type(item) not in (bool, int, float):  # np.longdouble's item is itself
        raise unkeepable(path, value, f"NumPy scalar of dtype {value.dtype}, wider than the double JSON carries")
    if isinstance(item, float) and not math.isfinite(item):
        item = {_FLOAT: "nan" if math.isnan(item) else ("inf" if item > 0 else "-inf")}
    return {_NUMPY: value.dtype.str, "value": item}


def _numpy():
    return _NUMPY_MODULE


class FormatError(ValueError):
    """The blob is not baton's state-dict JSON (raised as baton.InvalidArgument by the caller)."""


def dumps(tree):
    """Bytes of the JSON text (UTF-8, no NaN literals)."""
    text = json.dumps(tree, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        # A str with a lone surrogate (os.fsdecode's name of a file that is not UTF-8)
        # has no UTF-8 form; escaped as \udcff it is still JSON and reads back the same.
        return json.dumps(tree, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _refuse_constant(name):
    raise FormatError(f"JSON constant {name} (baton writes NaN and infinities as tagged objects)")


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):  # 1e400: float() says inf, which baton writes tagged
        raise FormatError(f"JSON number {text[:40]} is past a double's range")
    return value


def loads(data, what):
    """The JSON value in ``data`` (bytes), with json.loads only; FormatError naming ``what``."""
    try:
        return json.loads(bytes(data).decode("utf-8"), parse_constant=_refuse_constant,
                          parse_float=_finite_float)
    except FormatError as e:
        raise FormatError(f"{what}: {e}") from None
    except RecursionError:
        raise FormatError(f"{what}: JSON nested deeper than Python's recursion limit "
                          f"(baton writes at most {MAX_DEPTH} levels of containers)") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise FormatError(f"{what} is not JSON ({e}); baton reads checkpoint metadata as JSON "
                          "only, never with pickle") from None


def decode(node, path, on_tag):
    """The Python value of an encoded node.

    ``on_tag(tag, node, path)`` decodes the array, object and per-rank
    nodes; any other unknown tag is a FormatError naming the path.
    """
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if len(path) >= MAX_DEPTH and isinstance(node, (list, dict)):
        raise FormatError(f"'{path_text(path)}': containers nested deeper than {MAX_DEPTH} levels "
                          "(baton writes at most that)")
    if isinstance(node, list):
        return [decode(v, path + (i,), on_tag) for i, v in enumerate(node)]
    if not isinstance(node, dict):
        raise FormatError(f"'{path_text(path)}': unexpected JSON value {node!r}")
    tags = [k for k in node if k.startswith("$")]
    if not tags:
        return {k: decode(v, path + (k,), on_tag) for k, v in node.items()}
    if len(tags) > 1:
        raise FormatError(f"'{path_text(path)}': an object with two tags {tags[:2]!r}")
    tag = tags[0]
    if tag in _TAG_KEYS:
        extra = sorted(k for k in node if k != tag and k not in _TAG_KEYS[tag])
        if extra:
            raise FormatError(f"'{path_text(path)}': {tag} with other keys {extra!r}")
    if tag == _TUPLE:
        return tuple(decode(v, path + (i,), on_tag) for i, v in enumerate(_field(node, _TUPLE, list, path)))
    if tag == _DICT:
        for flag in ("ordered", "counter"):
            if flag in node and type(node[flag]) is not bool:
                raise FormatError(f"'{path_text(path)}': {_DICT} with {flag} {node[flag]!r} (a bool)")
        out = (collections.OrderedDict() if node.get("ordered") else
               collections.Counter() if node.get("counter") is True else {})
        for pair in _field(node, _DICT, list, path):
            if not isinstance(pair, list) or len(pair) != 2 or type(pair[0]) not in _KEY_TYPES:
                raise FormatError(f"'{path_text(path)}': malformed {_DICT} entry {pair!r}")
            out[pair[0]] = decode(pair[1], path + (pair[0],), on_tag)
        if "meta" in node:
            if type(out) is dict:
                out = collections.OrderedDict(out)
            out._metadata = decode(node["meta"], path + ("_metadata",), on_tag)
        return out
    if tag == _FLOAT:
        text = _field(node, _FLOAT, str, path)
        if text not in ("nan", "inf", "-inf"):
            raise FormatError(f"'{path_text(path)}': malformed {_FLOAT} {text!r}")
        return float(text)
    if tag == _BYTES:
        text = _field(node, _BYTES, str, path)
        try:
            return base64.b64decode(text, validate=True)
        except ValueError as e:
            raise FormatError(f"'{path_text(path)}': malformed {_BYTES}: {e}") from None
    if tag == _NUMPY:
        np = _numpy()
        try:
            dtype = np.dtype(_field(node, _NUMPY, str, path))
        except TypeError as e:
            raise FormatError(f"'{path_text(path)}': {_NUMPY} dtype: {e}") from None
        if dtype.kind not in "biuf":
            raise FormatError(f"'{path_text(path)}': {_NUMPY} of dtype {dtype} (only numbers are kept)")
        return _numpy_value(dtype, node.get("value"), path)
    return on_tag(tag, node, path)


def _numpy_value(dtype, value, path):
    """The scalar of ``dtype`` whose item encode wrote: a bool, an int in the dtype's range, a float."""
    if isinstance(value, dict) and set(value) == {_FLOAT}:
        value = decode(value, path, None)
    want = {"b": (bool,), "i": (int,), "u": (int,), "f": (float, int)}[dtype.kind]
    if type(value) not in want:
        raise FormatError(f"'{path_text(path)}': {_NUMPY} of dtype {dtype} with value {value!r}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # NumPy < 2 wraps an out-of-range int with a DeprecationWarning
            out = dtype.type(value)
    except (OverflowError, ValueError, TypeError, DeprecationWarning) as e:
        raise FormatError(f"'{path_text(path)}': {_NUMPY} of dtype {dtype} with value {value!r}: {e}") from None
    if dtype.kind in "iu" and out.item() != value:
        raise FormatError(f"'{path_text(path)}': {_NUMPY} value {value!r} is outside dtype {dtype}")
    return out


def _field(node, tag, kind, path):
    value = node[tag]
    if not isinstance(value, kind):
        raise FormatError(f"'{path_text(path)}': malformed {tag} {value!r}")
    return value

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
"""

import base64
import collections
import json
import math

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

_KEY_TYPES = (str, int, float, bool, type(None))


def path_text(path):
    """The path of a leaf as an error message shows it: keys joined by '/'."""
    return "/".join(str(k) for k in path) if path else "<the state dict>"


def unkeepable(path, value, why=None):
    """The TypeError for a leaf that cannot be kept, naming its path."""
    kind = type(value).__module__ + "." + type(value).__qualname__
    text = (f"baton: cannot keep '{path_text(path)}': a {kind} is neither a tensor, a NumPy array, "
            "an object with state_dict()/load_state_dict(), nor a value JSON can carry (None, bool, "
            "int, float, str, bytes, list, tuple, dict, NumPy scalar); checkpoints never use pickle")
    if why:
        text += f" ({why})"
    return TypeError(text)


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
        _open = set() if _open is None else _open
        if id(value) in _open:
            raise TypeError(f"baton: cannot keep '{path_text(path)}': the {t.__name__} holds itself "
                            "(JSON has no cycles)")
        _open.add(id(value))
        try:
            return _encode_container(value, t, path, on_other, _open)
        finally:
            _open.discard(id(value))
    if value is None or t is bool or t is str or t is int:
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
    if isinstance(item, float) and not math.isfinite(item):
        item = {_FLOAT: "nan" if math.isnan(item) else ("inf" if item > 0 else "-inf")}
    return {_NUMPY: value.dtype.str, "value": item}


def _numpy():
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is a dependency of the extension
        return None
    return numpy


class FormatError(ValueError):
    """The blob is not baton's state-dict JSON (raised as baton.InvalidArgument by the caller)."""


def dumps(tree):
    """Bytes of the JSON text (UTF-8, no NaN literals)."""
    return json.dumps(tree, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


def _refuse_constant(name):
    raise FormatError(f"JSON constant {name} (baton writes NaN and infinities as tagged objects)")


def loads(data, what):
    """The JSON value in ``data`` (bytes), with json.loads only; FormatError naming ``what``."""
    try:
        return json.loads(bytes(data).decode("utf-8"), parse_constant=_refuse_constant)
    except FormatError as e:
        raise FormatError(f"{what}: {e}") from None
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
    if isinstance(node, list):
        return [decode(v, path + (i,), on_tag) for i, v in enumerate(node)]
    if not isinstance(node, dict):
        raise FormatError(f"'{path_text(path)}': unexpected JSON value {node!r}")
    tag = next((k for k in node if k.startswith("$")), None)
    if tag is None:
        return {k: decode(v, path + (k,), on_tag) for k, v in node.items()}
    if tag == _TUPLE:
        return tuple(decode(v, path + (i,), on_tag) for i, v in enumerate(_field(node, _TUPLE, list, path)))
    if tag == _DICT:
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
        try:
            return base64.b64decode(_field(node, _BYTES, str, path), validate=True)
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
        value = node.get("value")
        if isinstance(value, dict):
            value = decode(value, path, on_tag)
        return dtype.type(value)
    return on_tag(tag, node, path)


def _field(node, tag, kind, path):
    value = node[tag]
    if not isinstance(value, kind):
        raise FormatError(f"'{path_text(path)}': malformed {tag} {value!r}")
    return value

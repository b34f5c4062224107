"""The ranks' agreement on the plan of a save or a restore, before anything else is collective.

Every collective call of Checkpointer begins here: each rank gives what
every rank must hold equal (state_walk.LocalPlan.agreed: the call and its
arguments, each array's name, path, kind, dtype and global shape (and a
DTensor's placements and mesh), the per-rank keys; or the error its own
walk raised), the ranks exchange a SHA-256 digest of it (one all-gather of
32 bytes, under the runtime's collective deadline:
_baton._allgather_bytes), and only when the digests
differ the documents themselves, to name the differences. Then every rank
raises the same baton.InvalidArgument, naming the paths and the ranks, and
none of them has started a collective the others would not start: no rank
waits for ever. A rank that never comes (it skipped the call, sleeps, or
closed its Runtime) makes the others exit 75 at the deadline, naming the
call (the runtime's own collectives do the same).
"""

import hashlib

from baton import _baton, metadata
from baton.errors import invalid

_SHOWN = 20  # differences named in the error; the count of the rest follows


def agree(runtime, doc, what):
    """Returns when every rank's ``doc`` is the same; else the same InvalidArgument on every rank.

    ``doc``: JSON-able, or (its JSON bytes, their SHA-256) where the caller
    has them (LocalPlan.agreed_json); every rank of one call gives the same
    form, or their digests differ.
    """
    data, digest = doc if isinstance(doc, tuple) else (metadata.dumps(doc), None)
    digest = hashlib.sha256(data).digest() if digest is None else digest
    digests = _baton._allgather_bytes(runtime, digest, f"{what}: agreeing on the plan",
                                      fixed=hashlib.sha256().digest_size)
    if all(d == digests[0] for d in digests):
        return
    docs = [metadata.loads(b, f"rank {r}'s plan") for r, b in
            enumerate(_baton._allgather_bytes(runtime, data, f"{what}: exchanging the plans that differ"))]
    lines = differences(docs)
    shown = "\n  ".join(lines[:_SHOWN])
    more = f"\n  ... and {len(lines) - _SHOWN} more" if len(lines) > _SHOWN else ""
    raise invalid(runtime, f"{what}: the ranks' states differ, so no rank saved or restored anything "
                           f"(every rank raises this):\n  {shown}{more}")


def differences(docs):
    """One line per difference between the ranks' documents, naming the ranks."""
    lines = []
    errors = {r: d["error"] for r, d in enumerate(docs) if d.get("error")}
    for text, ranks in _groups(errors).items():
        lines.append(f"{_ranks(ranks)} could not make the plan: {text}")
    calls = {r: d.get("call") for r, d in enumerate(docs)}
    if len(_groups(calls)) > 1:
        lines.append("the call differs: " + "; ".join(f"{_ranks(ranks)}: {_call_text(call)}"
                                                      for call, ranks in _groups(calls).items()))
    planned = [r for r, d in enumerate(docs) if not d.get("error")]
    if len(planned) < 2:
        return lines or ["the plans differ"]
    per_array = {}
    for r in planned:
        # A rank-local step's document ({"call", "error"}: Checkpointer._agree_local_step) has no plan.
        for name, path, kind, dtype, shape, *layout in docs[r].get("arrays", ()):  # layout: a DTensor's placements and mesh
            per_array.setdefault(name, {})[r] = (path, kind, dtype, tuple(shape), *layout)
    for name in sorted(per_array):
        held = per_array[name]
        path = next(iter(held.values()))[0]
        seen = {r: held.get(r) for r in planned}
        groups = _groups({r: (None if v is None else v[1:]) for r, v in seen.items()})
        if len(groups) > 1:
            lines.append(f"'{path}': " + "; ".join(
                f"{_ranks(ranks)}: {'absent' if v is None else ' '.join(str(x) for x in v)}"
                for v, ranks in groups.items()))
    keys = {r: tuple(docs[r].get("per_rank", ())) for r in planned}
    all_keys = sorted(set().union(*keys.values()))
    for key in all_keys:
        groups = _groups({r: key in k for r, k in keys.items()})
        if len(groups) > 1:
            lines.append(f"per-rank state '{key}': " + "; ".join(
                f"{_ranks(ranks)}: {'present' if has else 'absent'}" for has, ranks in groups.items()))
    for field in sorted({k for r in planned for k in docs[r]} - {"call", "arrays", "per_rank", "error"}):
        groups = _groups({r: docs[r].get(field) for r in planned})
        if len(groups) > 1:
            lines.append(f"{field}: " + "; ".join(f"{_ranks(ranks)}: {v!r}" for v, ranks in groups.items()))
    return lines or ["the plans differ"]


def _groups(by_rank):
    """{value: [ranks]} of a {rank: value} (values made hashable)."""
    out = {}
    for r, v in by_rank.items():
        out.setdefault(_frozen(v), []).append(r)
    return out


def _frozen(v):
    if isinstance(v, list):
        return tuple(_frozen(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    return v


def _ranks(ranks):
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _call_text(call):
    if not call:
        return "nothing"
    name, *args = call
    return f"{name}({', '.join(repr(a) for a in args)})"

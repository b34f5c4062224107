"""baton's errors as the state-dict layer raises them: its own, and others' with a path added.

The extension's errors carry ``code``, ``component``, ``where`` and
``message`` (python/src/errors.cc); the ones made here carry the same, so a
program that inspects them sees one shape whichever half raised.
"""

from baton import _baton

COMPONENT = "python"


def invalid(runtime, text):
    """A baton.InvalidArgument naming this rank and host, with baton's attributes."""
    try:
        where = f"rank {runtime.rank}, {runtime.host}"
    except _baton.Error:  # a closed Runtime
        where = "a closed Runtime"
    e = _baton.InvalidArgument(f"baton ({where}): {text}")
    e.code, e.component, e.where, e.message = "InvalidArgument", COMPONENT, where, text
    return e


def with_context(e, text):
    """``e`` again with ``text`` (a path, the call) before its message, keeping its type and attributes.

    The new exception has e's class and e's attributes (a baton.Error's
    code, component and where; ``message`` gets the text too); where e's
    class cannot be made from one string, e itself with ``text`` as a note.
    """
    try:
        out = type(e)(f"{text}: {e}")
    except Exception:  # noqa: BLE001  (a constructor that takes other arguments)
        e.add_note(text)
        return e
    out.__dict__.update(getattr(e, "__dict__", {}))
    if isinstance(getattr(e, "message", None), str):
        out.message = f"{text}: {e.message}"
    out.__cause__ = e
    return out

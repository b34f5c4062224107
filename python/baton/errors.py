"""baton's errors as the state-dict layer raises them: its own, and others' with a path added.

The extension's errors carry ``code``, ``component``, ``where`` and
``message`` (python/src/errors.cc); the ones made here carry the same, so a
program that inspects them sees one shape whichever half raised.
"""

from baton import _baton

COMPONENT = "python"


class ResizeRefused(SystemExit):
    """restore(state, drop_rank_state_on_resize=False) at another world size than the version's.

    A SystemExit with code EXIT_REQUEUE (75): uncaught, every rank exits 75
    (the refusal is agreed: every rank meets it at the same restore), the
    job is requeued onto as many ranks as saved the state, and `baton run`
    reports the refusal (the event log's "refused ..." failure record), not
    a bug. ``message`` (and str()) says which state and which world sizes.
    """

    def __init__(self, message):
        super().__init__(_baton.EXIT_REQUEUE)
        self.message = message

    def __str__(self):
        return self.message


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


# The C++ options the extension's messages name, as a Python program passes them.
_PYTHON_WORDS = {
    "RestoreOptions::drop_rank_state_on_resize": "drop_rank_state_on_resize=True",
    "RestoreOptions::from_level": "from_level=",
    "CheckpointOptions::local_dir": "local_dir=",
    "CheckpointOptions::run_id": "run_id=",
    "CheckpointOptions::dir": "dir=",
}


def in_python_words(e):
    """``e`` with the C++ option names in its text replaced by the Python keywords (same class and attributes).

    ``e`` itself when its text names none.
    """
    text = str(e)
    if "Options::" not in text:
        return e
    for cpp, py in _PYTHON_WORDS.items():
        text = text.replace(cpp, py)
    try:
        out = type(e)(text)
    except Exception:  # noqa: BLE001  (a constructor that takes other arguments)
        return e
    out.__dict__.update(getattr(e, "__dict__", {}))
    if isinstance(getattr(e, "message", None), str):
        message = e.message
        for cpp, py in _PYTHON_WORDS.items():
            message = message.replace(cpp, py)
        out.message = message
    out.__cause__ = e.__cause__
    return out

"""baton.storage without MPI (tests/python/pure-modules.sh): that no other module of the package calls the
extension's storage (an AST scan of python/baton), and the module's own pure part (version names, a
reader's options, the listing)."""
import ast
import os

import pytest

import baton
from baton import storage

# The extension's storage: its checkpointer class and its listing. A module that never names them cannot make
# the extension's checkpointer; one that never reaches into a Storage (_array_ck) holds only Storage objects:
# then every call of the files goes through baton.storage.
_STORAGE_NAMES = {"ArrayCheckpointer", "_committed_versions"}
# The only module that may name them; __init__.py re-exports the class for programs (`baton.ArrayCheckpointer`).
_ALLOWED = "storage.py"
_REEXPORT = ("__init__.py", "ArrayCheckpointer")


def storage_calls(source, filename):
    """[(line, what)] where `source` reaches the extension's storage other than through baton.storage: names
    its class or listing (an attribute, an import, a string for getattr), reaches into a Storage, or calls
    _allgather_bytes on anything but the _baton module (that one is the Runtime's collective, not storage)."""
    reexport = os.path.basename(filename) == _REEXPORT[0]
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute):
            if node.attr in _STORAGE_NAMES:
                found.append((node.lineno, "." + node.attr))
            elif node.attr == "_array_ck":
                found.append((node.lineno, "._array_ck (a Storage's extension object)"))
            elif node.attr == "_allgather_bytes" and not (isinstance(node.value, ast.Name)
                                                         and node.value.id == "_baton"):
                found.append((node.lineno, "._allgather_bytes of a checkpointer"))
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name in _STORAGE_NAMES and not (reexport and alias.name == _REEXPORT[1]):
                    found.append((node.lineno, "import of " + alias.name))
        elif isinstance(node, ast.Name) and node.id in _STORAGE_NAMES:
            if not (reexport and node.id == _REEXPORT[1]):
                found.append((node.lineno, node.id))
        elif isinstance(node, ast.Constant) and node.value in _STORAGE_NAMES | {"_array_ck"}:
            if not (reexport and node.value == _REEXPORT[1]):  # __all__
                found.append((node.lineno, repr(node.value)))
    return found


def _package_sources():
    # The sources, not the build tree's links: a module not yet listed in Makefile.am is scanned too.
    root = os.path.dirname(os.path.realpath(baton.__file__))
    for here, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(here, name)


def test_only_baton_storage_calls_the_extensions_storage():
    sources = list(_package_sources())
    assert any(p.endswith(os.path.join("baton", "dcp", "writer.py")) for p in sources), sources
    offenders = {}
    for path in sources:
        if os.path.basename(path) == _ALLOWED and os.path.basename(os.path.dirname(path)) == "baton":
            continue
        with open(path, encoding="utf-8") as f:
            found = storage_calls(f.read(), path)
        if found:
            offenders[path] = found
    assert offenders == {}, "these modules call the extension's storage; go through baton.storage: %r" % offenders


@pytest.mark.parametrize("source,what", [
    ("from baton import _baton\nck = _baton.ArrayCheckpointer(rt, dir=d)\n", ".ArrayCheckpointer"),
    ("import baton\nck = baton.ArrayCheckpointer(rt)\n", ".ArrayCheckpointer"),
    ("from baton._baton import ArrayCheckpointer as A\n", "import of ArrayCheckpointer"),
    ("from baton._baton import _committed_versions\n", "import of _committed_versions"),
    ("from baton import _baton\nv = _baton._committed_versions(d)\n", "._committed_versions"),
    ("from baton import _baton\nck = getattr(_baton, 'ArrayCheckpointer')(rt)\n", "'ArrayCheckpointer'"),
    ("got = ck._allgather_bytes(b'', 'x')\n", "._allgather_bytes of a checkpointer"),
    ("s._array_ck.save(3)\n", "._array_ck (a Storage's extension object)"),
])
def test_the_scan_finds_each_way_to_the_extensions_storage(source, what):
    assert what in [w for _, w in storage_calls(source, "python/baton/front.py")]


def test_the_scan_lets_the_runtimes_collective_and_the_public_reexport_pass():
    assert storage_calls("from baton import _baton\n_baton._allgather_bytes(rt, b'', 'plan')\n", "x.py") == []
    assert storage_calls("from baton._baton import ArrayCheckpointer, Runtime\n", "baton/__init__.py") == []
    assert storage_calls("from baton._baton import ArrayCheckpointer\n", "baton/checkpointer.py") != []
    assert storage_calls("ck = storage.open_for_writing(rt, dir=d)\nck.save(3)\n", "x.py") == []


def test_a_version_is_named_by_its_last_path_part_at_either_level():
    assert storage.version_name("/shared/ck/v00000012-s400") == "v00000012-s400"
    assert storage.version_name("/shared/ck/v00000012-s400/") == "v00000012-s400"
    assert storage.version_name("/local/node3/v00000001-s0//") == "v00000001-s0"


def test_a_reader_opens_read_only_unless_it_reads_node_local_copies():
    options = {"keep": 2}
    assert storage.read_only_options(options) == {"keep": 2, "read_only": True}
    assert options == {"keep": 2}  # the caller's options are not changed
    assert storage.read_only_options({"level2": True}) == {"level2": True}
    assert storage.read_only_options({"local_dir": "/tmp/l"}) == {"local_dir": "/tmp/l"}
    assert storage.read_only_options({"local_dir": None, "level2": False}) == {
        "local_dir": None, "level2": False, "read_only": True}
    assert storage.read_only_options({"read_only": False}) == {"read_only": False}


def test_the_committed_versions_are_the_extensions_listing(tmp_path):
    assert storage.committed_versions(tmp_path / "absent") == [] and not (tmp_path / "absent").exists()
    d = tmp_path / "ck"
    d.mkdir()
    for seq, step, complete in ((1, 400, True), (2, 300, True), (3, 900, False)):
        v = d / ("v%08d-s%d" % (seq, step))
        v.mkdir()
        if complete:
            (v / "manifest.json").write_text("{}")
    assert storage.committed_versions(d) == [("v00000001-s400", 400), ("v00000002-s300", 300)]
    (tmp_path / "file").write_text("")
    assert storage.committed_versions(tmp_path / "file") == []

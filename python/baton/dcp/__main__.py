"""python -m baton.dcp import SOURCE DIR [--step N] [--keep K]
                   export DIR TARGET [--step N] [--format dcp|torch] [--force]

import: a DCP directory (FileSystemWriter's, with .metadata) or a torch.save
  file becomes a baton version of DIR (step: N, else one past the newest);
  DIR keeps K versions (default 3). DIR is new, empty or a baton checkpoint.
export: DIR's newest version, whoever wrote it (or step N's), becomes a
  DCP directory TARGET (--format dcp) or a torch.save file (--format torch:
  Checkpointer.load's answer, the version's own structure, tensors whole);
  an existing TARGET is replaced only with --force.
`baton ckpt import|export` runs this. Exit status: 0 done; 2 bad usage or
bad input (named on stderr, nothing written), or no torch; 1 any other
failure (named on stderr).
"""
import argparse
import sys

INSTALL_HINT = "install it with `scripts/install-deps --with-torch` (then configure again), or name another " \
               "interpreter with BATON_PYTHON"


def _parser(prog):
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--prog", help=argparse.SUPPRESS)  # the name in messages: `baton ckpt` passes its own
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="a DCP directory or torch.save file into a baton version")
    imp.add_argument("source")
    imp.add_argument("dir")
    imp.add_argument("--step", type=int)
    imp.add_argument("--keep", type=int, default=3)
    exp = sub.add_parser("export", help="a baton version out to DCP's format or a torch.save file")
    exp.add_argument("dir")
    exp.add_argument("target")
    exp.add_argument("--step", type=int)
    exp.add_argument("--format", choices=("dcp", "torch"), default="dcp")
    exp.add_argument("--force", action="store_true")
    return parser


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    prog = "python -m baton.dcp"
    if len(argv) >= 2 and argv[0] == "--prog":
        prog = argv[1]
    parser = _parser(prog)
    args = parser.parse_args(argv)
    if args.step is not None and args.step < 0:
        parser.error("--step %d: a step is >= 0" % args.step)
    if getattr(args, "keep", 1) < 1:
        parser.error("--keep %d: keep at least 1 version" % args.keep)
    what = "%s %s" % (prog, args.command)
    try:
        from baton import _baton
        from baton.dcp import convert_checks

        if args.command == "import":
            convert_checks.check_import(args.source, args.dir)
        else:
            convert_checks.check_export(args.dir, args.target, args.format, args.force)
        from baton.dcp import convert  # torch is imported only past the checks: seconds
    except ImportError as e:
        missing = getattr(e, "name", None) or str(e)
        hint = INSTALL_HINT if missing.split(".")[0] == "torch" else \
            "build baton with the Python extension for this interpreter (configure's summary says why not)"
        print("%s: %s cannot import %s (%s): %s" % (what, sys.executable, missing, e, hint), file=sys.stderr)
        return 2
    except (_baton.InvalidArgument, _baton.NotFound) as e:  # their text begins with the command's name
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 2
    except _baton.Error as e:  # a live writer holds DIR: not bad input
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 1
    try:
        if args.command == "import":
            step = convert.import_checkpoint(args.source, args.dir, step=args.step, keep=args.keep)
            print("imported %s into %s as step %d" % (args.source, args.dir, step))
        else:
            step = convert.export_checkpoint(args.dir, args.target, step=args.step, fmt=args.format,
                                             force=args.force)
            print("exported step %d of %s to %s (%s)" % (step, args.dir, args.target, args.format))
    except (_baton.InvalidArgument, _baton.NotFound) as e:  # bad input found on reading it; nothing written
        print("%s: %s" % (prog, e), file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001  (named, then a failed exit)
        print("%s: %s: %s" % (what, type(e).__name__, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

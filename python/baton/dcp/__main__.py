"""python -m baton.dcp import SOURCE DIR [--step N] | export DIR TARGET [--step N] [--format dcp|torch]

import: a DCP directory (FileSystemWriter's, with .metadata) or a torch.save
  file becomes a baton version of DIR (step: N, else one past the newest).
export: DIR's newest version written through DCP (or step N's) becomes a
  DCP directory TARGET (--format dcp) or a torch.save file (--format torch).
Exit status: 0 done; 2 bad usage; 1 any other failure (named on stderr).
"""
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m baton.dcp", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    imp = sub.add_parser("import", help="a DCP directory or torch.save file into a baton version")
    imp.add_argument("source")
    imp.add_argument("dir")
    imp.add_argument("--step", type=int)
    exp = sub.add_parser("export", help="a baton version out to DCP's format or a torch.save file")
    exp.add_argument("dir")
    exp.add_argument("target")
    exp.add_argument("--step", type=int)
    exp.add_argument("--format", choices=("dcp", "torch"), default="dcp")
    args = parser.parse_args(argv)
    if args.step is not None and args.step < 0:
        parser.error("--step %d: a step is >= 0" % args.step)
    from baton.dcp import convert  # torch is imported only past the usage check

    try:
        if args.command == "import":
            step = convert.import_checkpoint(args.source, args.dir, step=args.step)
            print("imported %s into %s as step %d" % (args.source, args.dir, step))
        else:
            step = convert.export_checkpoint(args.dir, args.target, step=args.step, fmt=args.format)
            print("exported step %d of %s to %s (%s)" % (step, args.dir, args.target, args.format))
    except Exception as e:  # noqa: BLE001  (named, then a failed exit)
        print("python -m baton.dcp %s: %s: %s" % (args.command, type(e).__name__, e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

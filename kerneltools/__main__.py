"""Command line: ``python -m kerneltools info``, ``clear-cache`` and
``check --backend cuda --compile-only``."""

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kerneltools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="version, backends, C compiler and kernel cache")
    sub.add_parser("clear-cache", help="delete the compiled kernels")
    check = sub.add_parser("check", help="compile the generated kernels of a backend")
    check.add_argument("--backend", choices=["cuda"], default="cuda")
    check.add_argument("--compile-only", action="store_true",
                       help="compile with NVRTC (no GPU needed); the only mode so far")
    check.add_argument("--arch", action="append", default=None,
                       help="target architecture, e.g. sm_90 (repeatable; default sm_80, sm_90)")
    args = parser.parse_args(argv)
    if args.command == "check":
        from ._check import check_cuda

        archs = tuple(args.arch or ("sm_80", "sm_90"))
        return 1 if check_cuda(archs, ops_archs=archs[-1:]) else 0
    if args.command == "info":
        from ._info import info

        info()
    else:
        from .backend.cpu._cache import cache_dir, clear_cache

        try:
            clear_cache()
        except OSError as exc:
            print(f"python -m kerneltools clear-cache: {exc.strerror or exc}",
                  file=sys.stderr)
            return 1
        print(f"cleared {cache_dir(create=False)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

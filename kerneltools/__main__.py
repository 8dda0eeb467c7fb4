"""Command line: ``python -m kerneltools info`` and ``python -m kerneltools clear-cache``."""

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kerneltools")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="version, backends, C compiler and kernel cache")
    sub.add_parser("clear-cache", help="delete the compiled kernels")
    args = parser.parse_args(argv)
    if args.command == "info":
        from ._info import info

        info()
    else:
        from .backend._cache import cache_dir, clear_cache

        clear_cache()
        print(f"cleared {cache_dir(create=False)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

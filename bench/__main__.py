"""Run every benchmark and print one table per comparison.

``python -m bench`` (``make bench``) for the figures; ``--quick`` runs the
same code on small counts, as a smoke test that the benchmarks still work.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import traceback
from importlib import metadata

from bench import (
    append_log,
    backup,
    chat,
    cli_startup,
    console,
    control_socket,
    dispatch,
    evolution,
    memory,
    ray_workers,
    runtimes,
    task_workers,
    tasks,
    telegram,
)

BENCHMARKS = (
    control_socket, dispatch, append_log, chat, cli_startup, memory, runtimes, telegram, tasks, task_workers,
    evolution, backup, console, ray_workers,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke test, not figures to quote")
    names = [benchmark.__name__.rsplit(".", 1)[-1] for benchmark in BENCHMARKS]
    parser.add_argument("--only", choices=names, action="append", help="run only this benchmark (repeatable)")
    arguments = parser.parse_args(argv)
    quick = arguments.quick
    chosen = [b for b, name in zip(BENCHMARKS, names, strict=True) if not arguments.only or name in arguments.only]
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in ("enact", "pykka", "lmdb", "orjson"))
    print(f"enact benchmarks{' (--quick: smoke test only)' if quick else ''}")
    print(f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; {versions}")
    print("each row: baseline and enact measured in this run; ratios are enact ÷ baseline\n")
    failed = []
    for benchmark in chosen:
        started = time.monotonic()
        try:
            table = benchmark.run(quick)
        except Exception:
            failed.append(benchmark.TITLE)
            print(f"{benchmark.TITLE}\nFAILED:\n{traceback.format_exc()}", flush=True)
            continue
        print(table.render())
        print(f"  ({time.monotonic() - started:.1f} s)\n", flush=True)
    if failed:
        print(f"{len(failed)} benchmark(s) failed: {'; '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

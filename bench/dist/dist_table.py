"""dist_table.py - running bench/dist/dist_bench under kvstore-launch and reading worker 0's
table: what run_matrix.py, secure_ab.py and shm_ab.py share. Run from the build directory
(tools/kvstore-launch and bench/dist/dist_bench there).
"""

import subprocess
import sys


def run_job(workers, servers, env, bench_args, timeout=1800):
    """The output (stdout and stderr) of one job `kvstore-launch -n W -s S --env E ... --
    bench/dist/dist_bench ARGS`; env is a list of "NAME=value". Raises when the job fails."""
    argv = [sys.executable, "tools/kvstore-launch", "-n", str(workers), "-s", str(servers)]
    for e in env:
        argv += ["--env", e]
    argv += ["--", "bench/dist/dist_bench"] + list(bench_args)
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True,
                          timeout=timeout).stdout.decode(errors="replace")


def worker0_rows(out, min_columns=8):
    """{size: columns} from worker 0's table in a job's output: size as printed ("4 KiB"),
    columns the line's |-separated columns, each split into words (column 0 is the size).
    Lines with fewer than min_columns columns are not table rows."""
    rows = {}
    for line in out.splitlines():
        if not line.startswith("[worker 0] "):
            continue
        cols = [c.split() for c in line.split("] ", 1)[1].split("|")]
        if len(cols) < min_columns or not cols[0] or cols[0][-1] not in ("KiB", "MiB"):
            continue
        rows[" ".join(cols[0])] = cols
    return rows

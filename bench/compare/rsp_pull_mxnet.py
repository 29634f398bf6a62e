"""row_sparse_pull and row-sparse push against MXNet 1.9.1, in one process, same shapes.

An embedding table of ROWS x 64 float32 (default 1,000,000 rows: 256 MB) in a local store
of each library; per round, each library runs, one call each and taking turns:
  dense pull   pull of the whole table into a dense output
  rsp pull     row_sparse_pull of FRACTION of the rows (random ids with repeats, unsorted)
  rsp push     push of a row-sparse gradient of those rows under sgd (lazy update)
MXNet's calls are asynchronous: each is timed up to wait_to_read / waitall. The reference
keeps a row-sparse key row-sparse (its row_sparse_pull needs that), so MXNet's table is
initialised as a row_sparse array holding every row; kvstore stores it dense. Printed: the
median per cell and library, each library's dense pull / rsp pull ratio, and kvstore's
speed-up over MXNet per cell.

Usage (from the repository root, after building build/):
  KVSTORE_LIBRARY=build/libkvstore.so.0 /tmp/mxvenv/bin/python bench/compare/rsp_pull_mxnet.py \
      [--rows 1000000] [--fraction 0.01] [--reps 15]
"""
import argparse
import os
import statistics
import sys
import time

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bindings", "python"))

import mxnet as mx  # noqa: E402
import kvstore  # noqa: E402
from kvstore import kv as kkv, nd as knd  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    rows, cols = args.rows, 64
    shape = (rows, cols)
    rng = numpy.random.default_rng(42)
    ids = rng.integers(0, rows, max(1, int(rows * args.fraction)), dtype=numpy.int64)
    uniq = numpy.unique(ids)
    grad_rows = numpy.full((uniq.size, cols), 0.001, numpy.float32)

    # MXNet 1.9.1
    mkv = mx.kv.create("local")
    mkv.init("w", mx.nd.ones(shape).tostype("row_sparse"))
    mkv.init("d", mx.nd.ones(shape))
    mkv.set_optimizer(mx.optimizer.SGD(learning_rate=0.01))
    m_dense_out = mx.nd.zeros(shape)
    m_rsp_out = mx.nd.sparse.zeros("row_sparse", shape)
    m_ids = mx.nd.array(ids, dtype="int64")
    m_grad = mx.nd.sparse.row_sparse_array((grad_rows, uniq), shape=shape)

    def m_dense_pull():
        mkv.pull("d", out=m_dense_out)
        m_dense_out.wait_to_read()

    def m_rsp_pull():
        mkv.row_sparse_pull("w", out=m_rsp_out, row_ids=m_ids)
        m_rsp_out.wait_to_read()

    def m_rsp_push():
        mkv.push("w", m_grad)
        mx.nd.waitall()

    # kvstore
    kst = kkv.create("local")
    kst.init(["w", "d"], [knd.ones(shape), knd.ones(shape)])
    kst.set_optimizer(kvstore.optimizer.SGD(learning_rate=0.01))
    k_dense_out = knd.zeros(shape)
    k_rsp_out = knd.sparse.zeros(shape)
    k_ids = knd.array(ids, dtype="int64")
    k_grad = knd.sparse.row_sparse_array((grad_rows, uniq), shape=shape)

    cells = [("mxnet", "dense pull", m_dense_pull), ("mxnet", "rsp pull", m_rsp_pull),
             ("mxnet", "rsp push", m_rsp_push),
             ("kvstore", "dense pull", lambda: kst.pull("d", out=k_dense_out)),
             ("kvstore", "rsp pull", lambda: kst.row_sparse_pull("w", out=k_rsp_out, row_ids=k_ids)),
             ("kvstore", "rsp push", lambda: kst.push("w", k_grad))]
    for _, _, fn in cells:  # warm-up
        fn()
    samples = {(lib, name): [] for lib, name, _ in cells}
    for _ in range(args.reps):
        for lib, name, fn in cells:
            samples[(lib, name)].append(timed(fn))
    med = {k: statistics.median(v) for k, v in samples.items()}

    assert sorted(k_rsp_out.indices.asnumpy().tolist()) == uniq.tolist()
    assert m_rsp_out.indices.asnumpy().tolist() == uniq.tolist()
    print("table %d x %d float32 (%.0f MB), %d row ids (%d unique), %d rounds, interleaved"
          % (rows, cols, rows * cols * 4 / 1e6, ids.size, uniq.size, args.reps))
    print("%-12s %12s %12s %14s" % ("cell", "mxnet ms", "kvstore ms", "kvstore speed-up"))
    for name in ("dense pull", "rsp pull", "rsp push"):
        m, k = med[("mxnet", name)], med[("kvstore", name)]
        print("%-12s %12.3f %12.3f %13.1fx" % (name, m * 1e3, k * 1e3, m / k))
    for lib in ("mxnet", "kvstore"):
        print("%s: dense pull / rsp pull %.1fx, dense pull / rsp push %.1fx"
              % (lib, med[(lib, "dense pull")] / med[(lib, "rsp pull")],
                 med[(lib, "dense pull")] / med[(lib, "rsp push")]))
    kst.close()


if __name__ == "__main__":
    main()

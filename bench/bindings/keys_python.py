"""Per-key cost of a Python push / pull of K keys in one call against the same call from C in
the same process, at K = 100 and K = 100,000: whether the binding or the library is what grows
per key with K.

    KVSTORE_LIBRARY=build/libkvstore.so.0 PYTHONPATH=bindings/python /usr/bin/python3 \\
        bench/bindings/keys_python.py --calls-lib build/bench/bindings/libkvbench_calls.so

A "local" store per K, keys 1..K of 4 float32 each. Cells, ns per key, each the median over
--rounds rounds in which the two key counts and the cells take turns:

    py        store.push(keys, arrays) / store.pull(keys, out=arrays)
    c         the same library call made from C (calls.c, one ctypes call per batch)
    prep      the binding's own work per call: kv._fast_keys(keys) + kv._fast_arrays(arrays)

and, per K, py - c (what the binding adds) and the ratios of each figure at K = 100,000 to
K = 100 (1.0 is a flat per-key cost).
"""
import argparse
import ctypes
import statistics
import timeit

from kvstore import kv, nd
from kvstore._lib import KVArrayHandle, KVStoreHandle

COUNTS = (100, 100000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls-lib", required=True, help="path of libkvbench_calls.so")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--keys-per-batch", type=int, default=300000,
                    help="keys moved per timed batch (the batch is this / K calls)")
    args = ap.parse_args()

    timed = ctypes.CDLL(args.calls_lib).kvbench_time_calls
    timed.restype = ctypes.c_double
    timed.argtypes = [KVStoreHandle, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                      ctypes.POINTER(KVArrayHandle), ctypes.c_long]
    setups = {}
    for n in COUNTS:
        store = kv.create("local")
        keys = list(range(1, n + 1))
        arrays = [nd.ones((4,)) for _ in keys]
        store.init(keys, arrays)
        setups[n] = dict(store=store, keys=keys, arrays=arrays, n=n, h=store.handle,
                         ck=(ctypes.c_int * n)(*keys),
                         ca=(KVArrayHandle * n)(*[a.handle for a in arrays]),
                         fk=kv._fast_keys, fa=kv._fast_arrays)
    stmts = {"py_push": "store.push(keys, arrays)", "py_pull": "store.pull(keys, out=arrays)",
             "prep": "fk(keys); fa(arrays, n, False)"}
    figures = {(n, cell): [] for n in COUNTS for cell in ("py_push", "c_push", "py_pull",
                                                           "c_pull", "prep")}
    for r in range(args.rounds):
        for n in (COUNTS if r % 2 == 0 else COUNTS[::-1]):
            s = setups[n]
            calls = max(1, args.keys_per_batch // n)
            for cell in ("py_push", "c_push", "py_pull", "c_pull", "prep"):
                if cell.startswith("c_"):
                    t = timed(s["h"], 0 if cell == "c_push" else 1, n, s["ck"], s["ca"], calls)
                    if t < 0:
                        raise RuntimeError("a C call failed (%d)" % t)
                else:
                    t = timeit.timeit(stmts[cell], globals=s, number=calls)
                figures[(n, cell)].append(t / calls / n * 1e9)
    med = {k: statistics.median(v) for k, v in figures.items()}
    print("ns per key, medians of %d rounds" % args.rounds)
    print("%8s  %8s %8s %8s  %8s %8s %8s  %8s" % ("keys", "py push", "C push", "py-C",
                                                  "py pull", "C pull", "py-C", "prep"))
    for n in COUNTS:
        print("%8d  %8.0f %8.0f %8.0f  %8.0f %8.0f %8.0f  %8.0f" % (
            n, med[(n, "py_push")], med[(n, "c_push")], med[(n, "py_push")] - med[(n, "c_push")],
            med[(n, "py_pull")], med[(n, "c_pull")], med[(n, "py_pull")] - med[(n, "c_pull")],
            med[(n, "prep")]))
    big, small = COUNTS[1], COUNTS[0]
    print("per key at %d / at %d:" % (big, small), "  ".join(
        "%s %.2fx" % (cell, med[(big, cell)] / med[(small, cell)])
        for cell in ("py_push", "c_push", "py_pull", "c_pull", "prep")))
    for s in setups.values():
        s["store"].close()


if __name__ == "__main__":
    main()

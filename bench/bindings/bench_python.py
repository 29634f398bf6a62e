"""The Python side of the bindings bench (bench/bindings/run.py runs it; it also runs alone).

    KVSTORE_LIBRARY=build/libkvstore.so.0 PYTHONPATH=bindings/python \\
        /usr/bin/python3 bench/bindings/bench_python.py --calls-lib build/bench/bindings/libkvbench_calls.so

The cells of bench_bindings_c.c (a "local" store, key 0 and keys 1..100 of 4 float32 each;
push1/pull1 per call, push100/pull100 one call of 100 keys, per key), each measured three
ways in turn within every round, on the same store and arrays:

    py       the binding: store.push(0, a), store.pull(0, out=a), store.push(keys, arrays), ...
    c        the same library calls from C (calls.c through ctypes: one ctypes call per batch,
             so the figure is the library's own cost)
    ctypes   the same library call through the binding's declared ctypes prototype with the
             arguments built beforehand: what any ctypes binding pays at least per call
    noop     (one figure per round) a ctypes call of KVGetVersion: the interpreter's floor

Prints one JSON object: {"lang": "python", "push1": [...], "c_push1": [...],
"ctypes_push1": [...], ..., "noop": [...]}, nanoseconds, one figure per round.
"""
import argparse
import ctypes
import json
import timeit

from kvstore import kv, nd
from kvstore._lib import LIB, KVArrayHandle, KVStoreHandle

NKEYS = 100
CELLS = ("push1", "pull1", "push100", "pull100")


def time_batch(stmt, namespace, seconds):
    """Nanoseconds per run of the statement stmt over about `seconds` (the batch grown to a
    tenth of that first). timeit compiles stmt into its loop: no function call is added."""
    timer = timeit.Timer(stmt, globals=namespace)
    calls = 16
    while True:
        t = timer.timeit(calls)
        if t >= seconds / 10:
            break
        calls *= 4
    n = max(1, int(calls * seconds / t))
    return timer.timeit(n) / n * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls-lib", required=True, help="path of libkvbench_calls.so")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=0.2)
    args = ap.parse_args()

    calls = ctypes.CDLL(args.calls_lib)
    timed = calls.kvbench_time_calls
    timed.restype = ctypes.c_double
    timed.argtypes = [KVStoreHandle, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                      ctypes.POINTER(KVArrayHandle), ctypes.c_long]

    store = kv.create("local")
    one = nd.ones((4,))
    many = [nd.ones((4,)) for _ in range(NKEYS)]
    keys = list(range(1, NKEYS + 1))
    store.init([0] + keys, [one] + many)

    c_one_key = (ctypes.c_int * 1)(0)
    c_one_arr = (KVArrayHandle * 1)(one.handle)
    c_keys = (ctypes.c_int * NKEYS)(*keys)
    c_arrs = (KVArrayHandle * NKEYS)(*[a.handle for a in many])
    h = store.handle
    push, pull, version = LIB.KVStorePush, LIB.KVStorePull, LIB.KVGetVersion

    ns = dict(globals(), **locals())
    py = {
        "push1": "store.push(0, one)",
        "pull1": "store.pull(0, out=one)",
        "push100": "store.push(keys, many)",
        "pull100": "store.pull(keys, out=many)",
    }
    raw = {
        "push1": "push(h, 1, c_one_key, c_one_arr, 0)",
        "pull1": "pull(h, 1, c_one_key, c_one_arr, 0)",
        "push100": "push(h, NKEYS, c_keys, c_arrs, 0)",
        "pull100": "pull(h, NKEYS, c_keys, c_arrs, 0)",
    }
    c_args = {
        "push1": (0, 1, c_one_key, c_one_arr),
        "pull1": (1, 1, c_one_key, c_one_arr),
        "push100": (0, NKEYS, c_keys, c_arrs),
        "pull100": (1, NKEYS, c_keys, c_arrs),
    }

    def c_cell(cell, seconds):
        op, num, k, a = c_args[cell]
        n = 16
        while True:
            t = timed(h, op, num, k, a, n)
            if t < 0:
                raise RuntimeError("a C call failed (%d)" % t)
            if t >= seconds / 10:
                break
            n *= 4
        n = max(1, int(n * seconds / t))
        return timed(h, op, num, k, a, n) / n * 1e9

    out = {"lang": "python"}
    for cell in CELLS:
        for prefix in ("", "c_", "ctypes_"):
            out[prefix + cell] = []
    out["noop"] = []
    for cell in CELLS:  # warm-up
        time_batch(py[cell], ns, args.seconds / 4)
    for _ in range(args.reps):
        for cell in CELLS:
            per = NKEYS if cell.endswith("100") else 1
            out[cell].append(time_batch(py[cell], ns, args.seconds) / per)
            out["c_" + cell].append(c_cell(cell, args.seconds) / per)
            out["ctypes_" + cell].append(time_batch(raw[cell], ns, args.seconds) / per)
        out["noop"].append(time_batch("version()", ns, args.seconds))
    store.close()
    print(json.dumps({k: ([round(x, 2) for x in v] if isinstance(v, list) else v)
                      for k, v in out.items()}))


if __name__ == "__main__":
    main()

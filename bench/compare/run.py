"""kvstore against MXNet 1.9.1 on the same work: interleaved, repeated, ratios of medians.

Usage (from the repository root; MXNet 1.9.1 in a venv, bench/compare/README.md):
  /tmp/mxvenv/bin/python bench/compare/run.py --build build \
      [--sections local,latency,train,keys,dist,dist-latency,dist-keys] \
      [--rounds 5] [--dist-rounds 3] [--configs 1x1,2x1,2x2] [--quick] [--json FILE]

Every cell runs the same calls on both libraries through their Python APIs (MXNet's mx.kv and
kvstore's kv, the same shapes, dtypes and keys) and times each call to completion: MXNet's
calls only queue work on its engine, so each is timed up to wait_to_read() / waitall(), and
kvstore's up to wait_to_read() / wait_all() likewise. A printed ratio is kvstore's speed over
MXNet's (MXNet's median time / kvstore's median time; > 1: kvstore is faster), next to the
issue-13 target of its cell.

In-process sections (one Python process holding both libraries' local stores; per round,
each cell is measured once per library, the order of the libraries alternating per round;
a measurement is the median of 5 batches of calls that last 20 ms in all (50 ms for the
latency and key-count cells; calls longer than that run once); the cell's figure is the
median over the rounds):
  local     push of K values (K = 1, 2, 4, 8) of S bytes to one key (S = 4 KiB .. 64 MiB), and
            pull of that key into K outputs; no updater (the store keeps the sum).
            MXNet's push of ONE value with no updater makes the stored value the caller's
            array (no copy, nothing reduced): the script checks this at run time and marks
            those cells "alias" (no target).
  latency   one push and one pull of a small key (4 B and 4 KiB), per pair ("alias" like the
            K=1 push), and one pull alone.
  train     a 100-key model (50 weights 256 x 64 and 50 biases 64, float32, 0.82 M parameters)
            under sgd with momentum (the local store's updater): per step the gradients of all
            100 keys are pushed and the weights pulled, (a) in one push call and one pull
            call, (b) one push and one pull call per key (as Gluon's Trainer does).
  keys      push and pull of N keys of 4 float32 each in one call (N = 10 .. 100,000); per-key
            time, and each library's per-key time at N over its per-key time at N = 100.

Distributed sections (dist_sync over 127.0.0.1, W workers x S servers; per round and
configuration one MXNet job and one kvstore job, alternating which goes first; the figure is
the median over rounds of worker 0's median per iteration; each job first moves
--warmup-bytes, 512 MiB by default, per worker through a scratch key, untimed):
  dist          push + pull of one key of S bytes (1, 4, 16, 64 MiB) per worker per iteration,
                as bytes moved per worker per second (2 S per iteration)
  dist-latency  the same with 4 KiB, per push + pull pair
  dist-keys     (1 x 1 only) push and pull of N keys of 4 float32 in one call, N = 10 .. 100,000;
                and the time per key of the init call of those keys (no target)

Jobs are started by this script: the scheduler and servers are `kvstore-server` (kvstore) or
`python -c "import mxnet"` (MXNet, as its tools/launch.py does), the workers this script, all
with the DMLC_* variables of the ps-lite convention and the same GLIBC_TUNABLES as
tools/kvstore-launch sets for every process (read from that file). kvstore jobs are open
(KVSTORE_JOB_SECRET empty: no CURVE), as MXNet's are; docs/SECURITY.md has what a secured job
costs. A job that fails or passes --job-timeout is reported as such, and its cells are empty.
"""
import argparse
import importlib.machinery
import importlib.util
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))

KiB, MiB = 1024, 1024 * 1024
LOCAL_SIZES = [4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 64 * MiB]
LOCAL_KS = [1, 2, 4, 8]
DIST_SIZES = [1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB]
KEY_COUNTS = [10, 100, 1000, 10000, 100000]
KEY_FLOATS = 4            # elements per key in the key-count sections
MIN_BATCH_S = 0.02        # a measurement repeats the call at least this long

# Targets of issue 13, as kvstore speed / MXNet speed.
TARGET_DIST = 2.0
TARGET_DIST_LATENCY = 3.0
TARGET_LOCAL = 1.0


def size_name(s):
    if s >= MiB:
        return "%d MiB" % (s // MiB)
    if s >= KiB:
        return "%d KiB" % (s // KiB)
    return "%d B" % s


# -- the two libraries behind one small interface ------------------------------------------
class Store(object):
    """What both libraries' stores are driven through: the calls their Python APIs share
    (kvstore's follows MXNet's); each subclass makes the store and its arrays, waits and
    closes in its own way."""

    def init(self, keys, values):
        self.kv.init(keys, values)

    def push(self, keys, values):
        self.kv.push(keys, values)

    def pull(self, keys, outs):
        self.kv.pull(keys, out=outs)

    def read(self, a):
        return a.asnumpy()

    def write(self, a, value):
        a[:] = value

    def barrier(self):
        self.kv._barrier()

    @property
    def rank(self):
        return self.kv.rank


class MX(Store):
    """MXNet 1.9.1: every operation waits for the engine before it returns."""
    name = "mxnet"

    def __init__(self, store_type):
        import mxnet
        self.mx = mxnet
        self.kv = mxnet.kv.create(store_type)

    def array(self, n, value=1.0):
        return self.mx.nd.full((n,), value, dtype="float32")

    def set_sgd(self):
        self.kv.set_optimizer(self.mx.optimizer.SGD(learning_rate=0.01, momentum=0.9))

    def wait(self, arrays=None):
        if arrays is None:
            self.mx.nd.waitall()
        else:
            for a in arrays:
                a.wait_to_read()

    def close(self):
        self.mx.nd.waitall()
        del self.kv


class KV(Store):
    """kvstore's Python binding; waits like MX does (a no-op where the call completed)."""
    name = "kvstore"

    def __init__(self, store_type):
        import kvstore
        from kvstore import kv, nd
        self.kvstore, self.nd = kvstore, nd
        self.kv = kv.create(store_type)

    def array(self, n, value=1.0):
        return self.nd.full((n,), value)

    def set_sgd(self):
        self.kv.set_optimizer(self.kvstore.optimizer.SGD(learning_rate=0.01, momentum=0.9))

    def wait(self, arrays=None):
        if arrays is None:
            self.kv.wait_all()
        else:
            for a in arrays:
                a.wait_to_read()

    def close(self):
        self.kv.close()


def per_call(fn, min_s=MIN_BATCH_S, batches=5):
    """Seconds per call of fn: the median of `batches` batches that together last at least
    min_s (each batch's mean per call; one call per batch when a call is that long). A
    median of short batches drops the ones another process's time slice fell into."""
    t0 = time.perf_counter()
    fn()
    t = time.perf_counter() - t0
    n = max(1, int(min_s / batches / max(t, 1e-7)))
    if t >= min_s:
        return t
    means = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        means.append((time.perf_counter() - t0) / n)
    return statistics.median(means)


class Table(object):
    """Cells of one section: samples per (cell, library), printed as medians and ratios."""

    def __init__(self, short, title, unit="us"):
        self.short, self.title, self.unit = short, title, unit
        self.rows = []          # (cell, target, note) in order
        self.samples = {}       # (cell, lib) -> [seconds]

    def row(self, cell, target, note=""):
        if cell not in [r[0] for r in self.rows]:
            self.rows.append((cell, target, note))

    def add(self, cell, lib, seconds):
        self.samples.setdefault((cell, lib), []).append(seconds)

    def median(self, cell, lib):
        v = self.samples.get((cell, lib))
        return statistics.median(v) if v else None

    def result(self):
        out = []
        for cell, target, note in self.rows:
            m, k = self.median(cell, "mxnet"), self.median(cell, "kvstore")
            ratio = m / k if m and k else None
            out.append({"cell": cell, "target": target, "note": note, "mxnet_s": m,
                        "kvstore_s": k, "ratio": ratio,
                        "mxnet_samples": self.samples.get((cell, "mxnet"), []),
                        "kvstore_samples": self.samples.get((cell, "kvstore"), []),
                        "met": None if ratio is None or target is None else ratio >= target})
        return out

    def show(self, extra=None):
        scale = {"us": 1e6, "ms": 1e3}[self.unit]
        print("\n## %s: %s" % (self.short, self.title))
        print("| cell | MXNet %s | kvstore %s | kvstore / MXNet speed | target | note |"
              % (self.unit, self.unit))
        print("|---|---:|---:|---:|---:|---|")
        for r in self.result():
            fmt = lambda v: "-" if v is None else "%.4g" % (v * scale)  # noqa: E731
            ratio = "FAILED" if r["ratio"] is None else "%.2fx" % r["ratio"]
            if r["met"] is False:
                ratio = "**%s**" % ratio
            target = "-" if r["target"] is None else ">= %gx" % r["target"]
            note = r["note"] + (extra(r) if extra else "")
            print("| %s | %s | %s | %s | %s | %s |" % (r["cell"], fmt(r["mxnet_s"]),
                                                     fmt(r["kvstore_s"]), ratio, target, note))
        sys.stdout.flush()


def orders(rnd, libs):
    return libs if rnd % 2 == 0 else libs[::-1]


# -- in-process sections -------------------------------------------------------------------
def mxnet_push_aliases(lib):
    """True when MXNet's local store keeps the caller's array as the stored value after a push
    of one value (no updater): a later write to the pushed array shows in the next pull."""
    v, out = lib.array(16, 1.0), lib.array(16, 0.0)
    lib.init(999999, lib.array(16, 0.0))
    lib.push(999999, v)
    lib.wait()
    lib.write(v, 5.0)
    lib.wait()
    lib.pull(999999, out)
    lib.wait()
    return float(lib.read(out)[0]) == 5.0


def section_local(libs, rounds, sizes, ks):
    t = Table("local", "push/pull of K values of S bytes to one key, K outputs pulled", "us")
    alias = {lib.name: mxnet_push_aliases(lib) for lib in libs}
    key = 1000
    for s in sizes:
        n = s // 4
        setup = {}
        for lib in libs:
            for k in ks:
                vals = [lib.array(n, 1.0) for _ in range(k)]
                outs = [lib.array(n, 0.0) for _ in range(k)]
                lib.init(key + k, lib.array(n, 0.0))
                setup[(lib.name, k)] = (key + k, vals, outs)
            lib.wait()
        for k in ks:
            a = k == 1 and any(alias.values())
            t.row("push K=%d %s" % (k, size_name(s)), None if a else TARGET_LOCAL,
                  "alias: MXNet stores the caller's array" if a else "")
            t.row("pull K=%d %s" % (k, size_name(s)), TARGET_LOCAL)
        for rnd in range(rounds):
            for k in ks:
                for op in ("push", "pull"):
                    for lib in orders(rnd, libs):
                        kk, vals, outs = setup[(lib.name, k)]
                        v = vals[0] if k == 1 else vals
                        o = outs[0] if k == 1 else outs
                        if op == "push":
                            def fn(lib=lib, kk=kk, v=v):
                                lib.push(kk, v)
                                lib.wait()
                        else:
                            def fn(lib=lib, kk=kk, o=o, outs=outs):
                                lib.pull(kk, o)
                                lib.wait(outs)
                        t.add("%s K=%d %s" % (op, k, size_name(s)), lib.name, per_call(fn))
        key += 100
        del setup
        for lib in libs:
            lib.wait()
    t.show(lambda r: " %.2f GB/s kvstore" % (
        int(r["cell"].split("K=")[1].split()[0]) * parse_size(r["cell"]) / r["kvstore_s"] / 1e9)
        if r["kvstore_s"] else "")
    return t


def parse_size(cell):
    num, unit = cell.split()[-2:]
    return int(num) * {"B": 1, "KiB": KiB, "MiB": MiB}[unit]


def section_latency(libs, rounds):
    t = Table("latency", "one push + one pull of one key, and one pull alone", "us")
    alias = any(mxnet_push_aliases(lib) for lib in libs)
    setup = {}
    for lib in libs:
        for i, s in enumerate((4, 4 * KiB)):
            lib.init(5000 + i, lib.array(s // 4, 0.0))
            setup[(lib.name, s)] = (5000 + i, lib.array(s // 4, 1.0), lib.array(s // 4, 0.0))
    for s in (4, 4 * KiB):
        t.row("push+pull %s" % size_name(s), None if alias else TARGET_LOCAL,
              "alias: MXNet's push stores the caller's array" if alias else "")
        t.row("pull %s" % size_name(s), TARGET_LOCAL)
    for rnd in range(rounds):
        for s in (4, 4 * KiB):
            for lib in orders(rnd, libs):
                k, v, o = setup[(lib.name, s)]

                def fn(lib=lib, k=k, v=v, o=o):
                    lib.push(k, v)
                    lib.pull(k, o)
                    o.wait_to_read()
                t.add("push+pull %s" % size_name(s), lib.name, per_call(fn, 0.05))
            for lib in orders(rnd, libs):
                k, v, o = setup[(lib.name, s)]

                def fn(lib=lib, k=k, o=o):
                    lib.pull(k, o)
                    o.wait_to_read()
                t.add("pull %s" % size_name(s), lib.name, per_call(fn, 0.05))
    t.show()
    return t


TRAIN_SHAPES = [256 * 64, 64] * 50


def section_train(libs, rounds):
    t = Table("train", "training step of a 100-key model (0.82 M float32 parameters, "
              "sgd momentum 0.9)", "ms")
    setup = {}
    for lib in libs:
        keys = list(range(6000, 6000 + len(TRAIN_SHAPES)))
        lib.init(keys, [lib.array(n, 0.5) for n in TRAIN_SHAPES])
        lib.set_sgd()
        grads = [lib.array(n, 0.001) for n in TRAIN_SHAPES]
        weights = [lib.array(n, 0.0) for n in TRAIN_SHAPES]
        lib.wait()
        setup[lib.name] = (keys, grads, weights)
    t.row("push all + pull all (2 calls)", TARGET_LOCAL)
    t.row("push + pull per key (200 calls)", TARGET_LOCAL)
    for rnd in range(rounds):
        for lib in orders(rnd, libs):
            keys, grads, weights = setup[lib.name]

            def one(lib=lib, keys=keys, grads=grads, weights=weights):
                lib.push(keys, grads)
                lib.pull(keys, weights)
                lib.wait(weights)
            t.add("push all + pull all (2 calls)", lib.name, per_call(one, 0.1))
        for lib in orders(rnd, libs):
            keys, grads, weights = setup[lib.name]

            def per_key(lib=lib, keys=keys, grads=grads, weights=weights):
                for k, g, w in zip(keys, grads, weights):
                    lib.push(k, g)
                    lib.pull(k, w)
                lib.wait(weights)
            t.add("push + pull per key (200 calls)", lib.name, per_call(per_key, 0.1))
    t.show()
    return t


def keys_table(short, title, counts, target):
    t = Table(short, title, "us")
    for n in counts:
        t.row("%d keys" % n, target)
    return t


def flatness(t):
    """Per-key time at N over per-key time at 100 keys, per library (issue 13 item 1: <= 1.5)."""
    def note(r):
        out = []
        base = "init of 100 keys" if r["cell"].startswith("init") else "100 keys"
        for lib in ("mxnet", "kvstore"):
            ref, v = t.median(base, lib), t.median(r["cell"], lib)
            if ref and v:
                out.append("%s %.2f" % (lib, v / ref))
        return "per key vs 100 keys: " + ", ".join(out)
    return note


def section_keys(libs, rounds, counts):
    t = keys_table("keys", "key-count scaling, local store: push + pull of N keys (16 B each) "
                   "in one call, "
                   "time per key", counts, TARGET_LOCAL)
    # Keys are initialised once per count and library; rounds reuse them.
    stores = {}
    for lib in libs:
        for ci, n in enumerate(counts):
            keys = list(range(10 ** 6 + ci * 200000, 10 ** 6 + ci * 200000 + n))
            lib.init(keys, [lib.array(KEY_FLOATS, 0.0) for _ in keys])
            stores[(lib.name, n)] = (keys, [lib.array(KEY_FLOATS, 1.0) for _ in keys],
                                     [lib.array(KEY_FLOATS, 0.0) for _ in keys])
        lib.wait()
    for rnd in range(rounds):
        for n in counts:
            for lib in orders(rnd, libs):
                keys, vals, outs = stores[(lib.name, n)]

                def fn(lib=lib, keys=keys, vals=vals, outs=outs):
                    lib.push(keys, vals)
                    lib.pull(keys, outs)
                    lib.wait(outs)
                t.add("%d keys" % n, lib.name, per_call(fn, 0.05) / n)
    t.show(flatness(t))
    return t


# -- distributed sections ------------------------------------------------------------------
def dist_iters(nbytes):
    """Timed push + pull iterations per size: about 256 MiB moved each way, 5 to 100."""
    return max(5, min(100, (256 * MiB) // nbytes))


def dist_worker(a):
    """One worker of a dist_sync job (--_worker LIB); worker 0 prints CMPRESULT {json}: the
    median seconds per iteration of each cell (per key for the key counts)."""
    lib = (MX if a._worker == "mxnet" else KV)("dist_sync")
    res = {}
    key = 1

    def timed_loop(fn, iters, warm=2):
        for _ in range(warm):
            fn()
        lib.barrier()
        times = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    # Steady state first: every worker moves WARMUP_BYTES each way through a scratch key of
    # 64 MiB (split over the servers by both libraries), untimed, so that allocators, socket
    # buffers and kvstore's shared-memory rings (whose pages fault in on first use, 256 MiB
    # per direction by default) are warm before the first timed cell.
    if a.warmup_bytes:
        n = 64 * MiB // 4
        lib.init(key, lib.array(n, 0.0))
        v, o = lib.array(n, 1.0), lib.array(n, 0.0)
        lib.wait()
        for _ in range(max(1, a.warmup_bytes // (64 * MiB))):
            lib.push(key, v)
            lib.pull(key, o)
            o.wait_to_read()
        key += 1
        del v, o
    sizes = [int(x) for x in a.dist_sizes.split(",") if x]
    if a.latency:
        sizes.append(4 * KiB)
    for s in sizes:
        n = s // 4
        lib.init(key, lib.array(n, 0.0))
        v, o = lib.array(n, 1.0), lib.array(n, 0.0)
        lib.wait()
        lib.barrier()

        def fn(k=key, v=v, o=o):
            lib.push(k, v)
            lib.pull(k, o)
            o.wait_to_read()
        res["pushpull %d" % s] = timed_loop(fn, 200 if s <= 64 * KiB else dist_iters(s))
        key += 1
    for ci, n in enumerate(int(x) for x in a.key_counts.split(",") if x):
        keys = list(range(10 ** 6 + ci * 200000, 10 ** 6 + ci * 200000 + n))
        inits = [lib.array(KEY_FLOATS, 0.0) for _ in keys]
        lib.barrier()
        t0 = time.perf_counter()
        lib.init(keys, inits)
        lib.barrier()
        res["init %d" % n] = (time.perf_counter() - t0) / n
        vals = [lib.array(KEY_FLOATS, 1.0) for _ in keys]
        outs = [lib.array(KEY_FLOATS, 0.0) for _ in keys]
        lib.wait()
        lib.barrier()

        def fn(keys=keys, vals=vals, outs=outs):
            lib.push(keys, vals)
            lib.pull(keys, outs)
            lib.wait(outs)
        res["keys %d" % n] = timed_loop(fn, max(2, min(50, 20000 // n)), warm=1) / n
    lib.barrier()
    if lib.rank == 0:
        print("CMPRESULT " + json.dumps(res))
        sys.stdout.flush()
    lib.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def malloc_tunables():
    """GLIBC_TUNABLES that tools/kvstore-launch gives every process it starts."""
    path = os.path.join(ROOT, "tools", "kvstore-launch")
    loader = importlib.machinery.SourceFileLoader("kvstore_launch", path)
    spec = importlib.util.spec_from_loader("kvstore_launch", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod.MALLOC_TUNABLES


def run_job(lib, workers, servers, worker_args, a):
    """Starts a dist_sync job of lib (scheduler, servers, workers on 127.0.0.1), waits for it;
    returns worker 0's CMPRESULT dict, or None (and prints why) when the job failed."""
    common = dict(os.environ)
    common.update({"DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(free_port()),
                   "DMLC_NUM_WORKER": str(workers), "DMLC_NUM_SERVER": str(servers),
                   "DMLC_JOB_CLUSTER": "local", "GLIBC_TUNABLES": a.tunables,
                   "KVSTORE_JOB_SECRET": ""})
    if lib == "kvstore":
        server_cmd = [a.server]
    else:
        server_cmd = [sys.executable, "-c", "import mxnet"]
    worker_cmd = [sys.executable, os.path.abspath(__file__), "--_worker", lib,
                  "--warmup-bytes", str(a.warmup_bytes)] + worker_args
    plan = [("scheduler", {}, server_cmd)]
    plan += [("server", {"DMLC_SERVER_ID": str(r), "DMLC_TASK_ID": str(r)}, server_cmd)
             for r in range(servers)]
    plan += [("worker", {"DMLC_WORKER_ID": str(r), "DMLC_TASK_ID": str(r)}, worker_cmd)
             for r in range(workers)]
    procs = []
    for role, extra, cmd in plan:
        env = dict(common, DMLC_ROLE=role, **extra)
        procs.append((role, subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT,
                                             start_new_session=True)))
    deadline = time.monotonic() + a.job_timeout
    outputs = []
    failed = None
    for role, p in procs[::-1]:          # workers first: the job ends when they do
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            failed = failed or "timed out after %d s" % a.job_timeout
            for _, q in procs:
                if q.poll() is None:
                    os.killpg(q.pid, signal.SIGKILL)
            out, _ = p.communicate()
        outputs.append((role, out.decode(errors="replace")))
        if p.returncode != 0 and not failed:
            failed = "%s exited with %d" % (role, p.returncode)
    result = None
    for role, text in outputs:
        for line in text.splitlines():
            if line.startswith("CMPRESULT "):
                result = json.loads(line[len("CMPRESULT "):])
    if failed or result is None:
        print("  %s %dx%d job failed (%s); last output:" % (lib, workers, servers,
                                                            failed or "no result"))
        for role, text in outputs:
            for line in text.strip().splitlines()[-5:]:
                print("    [%s] %s" % (role, line))
        return None
    return result


def section_dist(a, sections):
    configs = [tuple(int(x) for x in c.split("x")) for c in a.configs.split(",")]
    tables = {}
    if "dist" in sections:
        tables["dist"] = Table("dist", "dist_sync push + pull of one key per worker, time per "
                               "iteration (ratio = bytes/s ratio)", "ms")
    if "dist-latency" in sections:
        tables["dist-latency"] = Table("dist-latency", "dist_sync 4 KiB push + pull latency",
                                       "us")
    if "dist-keys" in sections:
        tables["dist-keys"] = keys_table(
            "dist-keys", "key-count scaling, dist_sync 1 x 1: push + pull of N keys (16 B each) "
            "in one call, time per key", a.key_counts_list, None)
    for w, s in configs:
        for size in a.dist_sizes_list if "dist" in tables else []:
            tables["dist"].row("%dx%d %s" % (w, s, size_name(size)), TARGET_DIST)
        if "dist-latency" in tables:
            tables["dist-latency"].row("%dx%d 4 KiB" % (w, s), TARGET_DIST_LATENCY)
    for rnd in range(a.dist_rounds):
        for w, s in configs:
            args = ["--dist-sizes", ",".join(map(str, a.dist_sizes_list))
                    if "dist" in tables else ""]
            if "dist-latency" in tables:
                args.append("--latency")
            keys = "dist-keys" in tables and (w, s) == (1, 1)
            args += ["--key-counts", ",".join(map(str, a.key_counts_list)) if keys else ""]
            if "dist" not in tables and "dist-latency" not in tables and not keys:
                continue
            for lib in orders(rnd, ["mxnet", "kvstore"]):
                t0 = time.monotonic()
                res = run_job(lib, w, s, args, a)
                print("  round %d %dx%d %s: %.1f s" % (rnd + 1, w, s, lib,
                                                       time.monotonic() - t0))
                sys.stdout.flush()
                for name, sec in (res or {}).items():
                    kind, num = name.split()
                    num = int(num)
                    if kind == "keys":
                        tables["dist-keys"].add("%d keys" % num, lib, sec)
                    elif kind == "init":
                        tables["dist-keys"].row("init of %d keys" % num, None)
                        tables["dist-keys"].add("init of %d keys" % num, lib, sec)
                    elif num == 4 * KiB and "dist-latency" in tables:
                        tables["dist-latency"].add("%dx%d 4 KiB" % (w, s), lib, sec)
                    else:
                        tables["dist"].add("%dx%d %s" % (w, s, size_name(num)), lib, sec)
    for name, t in tables.items():
        if name == "dist":
            t.show(lambda r: " %.2f GB/s kvstore per worker" % (
                2 * parse_size(r["cell"]) / r["kvstore_s"] / 1e9) if r["kvstore_s"] else "")
        elif name == "dist-keys":
            t.show(flatness(t))
        else:
            t.show()
    return list(tables.values())


# -- the condensed tables of docs/PERFORMANCE.md (--report FILE.json) -----------------------
def report(paths):
    """Prints the tables of --json files (of one run each) in the condensed form of
    docs/PERFORMANCE.md: ratios (kvstore speed / MXNet speed), cells below target in bold."""
    rows, commits = {}, []
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        commits.append(d["commit"].split(" ")[0])
        rows.update({(t["section"], r["cell"]): r for t in d["tables"] for r in t["rows"]})

    def ratio(sec, cell, alias_ok=True):
        r = rows.get((sec, cell))
        if r is None:
            return "-"
        if r["ratio"] is None:
            return "**failed**"
        text = "%.2fx" % r["ratio"]
        if r["note"].startswith("alias"):
            return "alias (%s)" % text if alias_ok else text
        return "**%s**" % text if r["met"] is False else text

    def us(sec, cell, scale=1e6):
        r = rows.get((sec, cell))
        return ("%.3g / %.3g" % (r["mxnet_s"] * scale, r["kvstore_s"] * scale)
                if r and r["mxnet_s"] and r["kvstore_s"] else "-")

    print("measured at: %s" % ", ".join(commits))
    local = [c for (sec, c) in rows if sec == "local"]
    if local:
        sizes = sorted({parse_size(c) for c in local})
        ks = sorted({int(c.split("K=")[1].split()[0]) for c in local})
        print("\n| S | " + " | ".join("K=%d push | K=%d pull" % (k, k) for k in ks) + " |")
        print("|---|" + "---:|---:|" * len(ks))
        for sz in sizes:
            print("| %s | " % size_name(sz) + " | ".join(
                "%s | %s" % (ratio("local", "push K=%d %s" % (k, size_name(sz))),
                             ratio("local", "pull K=%d %s" % (k, size_name(sz))))
                for k in ks) + " |")
    for sec, unit, scale in (("latency", "us", 1e6), ("train", "ms", 1e3)):
        cells = [c for (s, c) in rows if s == sec]
        if cells:
            print("\n| %s | MXNet / kvstore %s | kvstore / MXNet speed |" % (sec, unit))
            print("|---|---:|---:|")
            for c in cells:
                print("| %s | %s | %s |" % (c, us(sec, c, scale), ratio(sec, c, alias_ok=True)))
    dist = [c for (s, c) in rows if s == "dist"]
    lat = [c for (s, c) in rows if s == "dist-latency"]
    if dist or lat:
        configs = []
        for c in dist + lat:
            if c.split()[0] not in configs:
                configs.append(c.split()[0])
        sizes = sorted({parse_size(c) for c in dist})
        print("\n| W x S | " + " | ".join(size_name(z) for z in sizes) + " | 4 KiB latency |")
        print("|---|" + "---:|" * (len(sizes) + 1))
        for cfg in configs:
            print("| %s | " % cfg.replace("x", " x ") + " | ".join(
                ratio("dist", "%s %s" % (cfg, size_name(z))) for z in sizes) +
                " | %s |" % ratio("dist-latency", "%s 4 KiB" % cfg))
    counts = sorted({int(c.split()[0]) for (s, c) in rows
                     if s in ("keys", "dist-keys") and c[0].isdigit()})
    if counts:
        print("\n| keys per call | local: us per key, MXNet / kvstore | local ratio | "
              "kvstore per key vs 100 | dist 1 x 1: us per key | dist ratio | "
              "kvstore per key vs 100 | dist init: us per key |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in counts:
            cell = "%d keys" % n
            flat = []
            for sec in ("keys", "dist-keys"):
                r, ref = rows.get((sec, cell)), rows.get((sec, "100 keys"))
                flat.append("%.2f" % (r["kvstore_s"] / ref["kvstore_s"])
                            if r and ref and r["kvstore_s"] and ref["kvstore_s"] else "-")
            print("| %d | %s | %s | %s | %s | %s | %s | %s |" % (
                n, us("keys", cell), ratio("keys", cell), flat[0], us("dist-keys", cell),
                ratio("dist-keys", cell), flat[1], us("dist-keys", "init of " + cell)))


# -- driver ---------------------------------------------------------------------------------
ALL_SECTIONS = ["local", "latency", "train", "keys", "dist", "dist-latency", "dist-keys"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--build", default="build", help="kvstore build directory")
    ap.add_argument("--sections", default=",".join(ALL_SECTIONS))
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the in-process sections")
    ap.add_argument("--dist-rounds", type=int, default=3, help="jobs per library and config")
    ap.add_argument("--configs", default="1x1,2x1,2x2", help="dist configs, workers x servers")
    ap.add_argument("--sizes", default=",".join(map(str, LOCAL_SIZES)), help="local, bytes")
    ap.add_argument("--ks", default=",".join(map(str, LOCAL_KS)))
    ap.add_argument("--dist-sizes", default=",".join(map(str, DIST_SIZES)), help="bytes")
    ap.add_argument("--key-counts", default=",".join(map(str, KEY_COUNTS)))
    ap.add_argument("--job-timeout", type=float, default=600)
    ap.add_argument("--warmup-bytes", type=int, default=512 * MiB,
                    help="untimed push + pull bytes per worker at the start of a dist job "
                         "(0: none)")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: 2 rounds, 1 job each, small sizes and key counts")
    ap.add_argument("--json", help="write every sample and median here")
    ap.add_argument("--report", metavar="FILE", nargs="+",
                    help="print a --json file's tables as docs/PERFORMANCE.md shows them")
    ap.add_argument("--_worker", choices=["mxnet", "kvstore"], help=argparse.SUPPRESS)
    ap.add_argument("--latency", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    os.environ.setdefault("KVSTORE_LIBRARY", os.path.join(build, "libkvstore.so.0"))
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
    if a._worker:
        return dist_worker(a)
    if a.report:
        return report(a.report)
    if a.quick:
        a.rounds, a.dist_rounds = 2, 1
        a.sizes, a.dist_sizes, a.key_counts = "4096,1048576", "1048576", "10,100,1000"
    sections = a.sections.split(",")
    unknown = set(sections) - set(ALL_SECTIONS)
    if unknown:
        ap.error("unknown sections %s (known: %s)" % (sorted(unknown), ALL_SECTIONS))
    a.dist_sizes_list = [int(x) for x in a.dist_sizes.split(",")]
    a.key_counts_list = [int(x) for x in a.key_counts.split(",")]
    a.server = os.path.join(build, "tools", "kvstore-server")
    a.tunables = malloc_tunables()
    head = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %cI %s"],
                          capture_output=True, text=True).stdout.strip()
    print("# kvstore vs MXNet 1.9.1, %s UTC" % time.strftime("%Y-%m-%d %H:%M", time.gmtime()))
    print("kvstore: %s (library %s)\nrounds %d in-process, %d jobs per dist cell; load %s"
          % (head, os.environ["KVSTORE_LIBRARY"], a.rounds, a.dist_rounds,
             " ".join("%.2f" % x for x in os.getloadavg())))
    tables = []
    if set(sections) & {"local", "latency", "train", "keys"}:
        import mxnet
        print("mxnet %s from %s" % (mxnet.__version__, os.path.dirname(mxnet.__file__)))
    # Each in-process section gets new local stores of both libraries (the training step's
    # optimizer must not run in the other sections).
    for name, run in (("local", lambda libs: section_local(
                          libs, a.rounds, [int(x) for x in a.sizes.split(",")],
                          [int(x) for x in a.ks.split(",")])),
                      ("latency", lambda libs: section_latency(libs, a.rounds)),
                      ("train", lambda libs: section_train(libs, a.rounds)),
                      ("keys", lambda libs: section_keys(libs, a.rounds, a.key_counts_list))):
        if name in sections:
            libs = [MX("local"), KV("local")]
            tables.append(run(libs))
            for lib in libs:
                lib.close()
    if set(sections) & {"dist", "dist-latency", "dist-keys"}:
        print("\ndist jobs: GLIBC_TUNABLES=%s, open (KVSTORE_JOB_SECRET empty)" % a.tunables)
        tables += section_dist(a, sections)
    missed = [(t.short, r) for t in tables for r in t.result() if r["met"] is not True
              and r["target"] is not None]
    print("\n## cells below target (or failed): %d" % len(missed))
    for title, r in missed:
        print("- %s: %s %s (target %gx)" % (title, r["cell"],
                                           "FAILED" if r["ratio"] is None
                                           else "%.2fx" % r["ratio"], r["target"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"commit": head, "tables": [{"section": t.short, "title": t.title,
                                                   "rows": t.result()}
                                                  for t in tables]}, f, indent=1)


if __name__ == "__main__":
    main()

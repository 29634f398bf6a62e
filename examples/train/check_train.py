#!/usr/bin/python3
"""Runs train_digits.py distributed (W workers, S servers, through kvstore-launch) and in one
process (store `local`), then checks that both reach the accuracy bound and agree.

    check_train.py --library build/libkvstore.so [--launcher build/tools/kvstore-launch]
                   [--workers 2] [--servers 1] [--epochs 20] [--min-accuracy 0.93]

Three runs (two without --launcher): `dist` (the distributed job), `local` (one process, one
gradient per key and step over the whole batch) and `local-shards` (one process pushing W
gradients per key and step, one per worker share, which the store sums).

- `local-shards` and `dist` agree with `local`: the final test accuracies differ by at most
  --accuracy-tolerance (default 0.01, i.e. 3 of the 357 test images) and every weight by at
  most --weight-tolerance (default 1e-4). They differ only in the order of float32 additions
  (a sum of per-worker sums against one sum over the batch): 20 epochs of sgd with the
  defaults leave the weights within 3.6e-7 of each other (measured with 2 workers and 1 or 2
  servers, printed by this script).
- `dist` equals `local-shards` bit for bit: sync servers add the pushes of a round in
  worker-rank order, which is the order in which the local store adds the values of a push.
- With --compression 2bit|1bit (passed on to train_digits.py) the single-process runs use the
  `device` store (`local` does not compress). `dist` still equals `local-shards` bit for bit:
  each worker's push is quantised with its own residual as each value of a device push is,
  and both sums are float32 in rank order. `local` quantises one gradient over the whole
  batch instead, so its weights differ by more than rounding: pass a --weight-tolerance
  that says how much.
Exit status 0 when every check holds, 1 otherwise.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))
TRAIN = os.path.join(HERE, "train_digits.py")
PYTHON = "/usr/bin/python3"


def run(cmd, env, what, quiet=False):
    """Runs cmd; its output streams through, or with quiet only its last line is shown (all
    of it when it fails)."""
    print("check_train: %s: %s" % (what, " ".join(cmd)))
    sys.stdout.flush()
    if quiet:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True)
        lines = proc.stdout.splitlines()
        print("\n".join(lines if proc.returncode != 0 else lines[-1:]))
        rc = proc.returncode
    else:
        rc = subprocess.call(cmd, env=env)
    if rc != 0:
        print("check_train: FAILED: %s exited with status %d" % (what, rc))
        sys.exit(1)


def compare(name_a, a, name_b, b, args):
    acc_a, acc_b = float(a["test_accuracy"]), float(b["test_accuracy"])
    dw = float(np.abs(a["weight"] - b["weight"]).max())
    db = float(np.abs(a["bias"] - b["bias"]).max())
    ok = abs(acc_a - acc_b) <= args.accuracy_tolerance and max(dw, db) <= args.weight_tolerance
    print("check_train: %s accuracy %.4f vs %s %.4f (|diff| %.4f, tolerance %.4f); "
          "max |weight diff| %.3g, max |bias diff| %.3g (tolerance %.3g)%s: %s"
          % (name_a, acc_a, name_b, acc_b, abs(acc_a - acc_b), args.accuracy_tolerance, dw,
             db, args.weight_tolerance, " [bit-identical]" if dw == 0 and db == 0 else "",
             "ok" if ok else "FAILED"))
    return ok


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", required=True, help="path of libkvstore.so")
    ap.add_argument("--launcher", help="kvstore-launch; without it only local runs happen")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--min-accuracy", type=float, default=0.93)
    ap.add_argument("--accuracy-tolerance", type=float, default=0.01)
    ap.add_argument("--weight-tolerance", type=float, default=1e-4)
    args, train_args = ap.parse_known_args(argv)

    env = dict(os.environ)
    env["KVSTORE_LIBRARY"] = os.path.abspath(args.library)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(SOURCE_DIR, "bindings", "python")] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    for var in [v for v in env if v.startswith("DMLC_")]:
        del env[var]  # the local runs must not look like launched workers
    common = ["--epochs", str(args.epochs), "--min-accuracy", str(args.min_accuracy)]
    common += train_args
    single = "device" if "--compression" in train_args else "local"  # local does not compress

    ok = True
    with tempfile.TemporaryDirectory(prefix="check_train.") as tmp:
        results = {}
        if args.launcher:
            path = os.path.join(tmp, "dist.npz")
            run([args.launcher, "-n", str(args.workers), "-s", str(args.servers), "--",
                 PYTHON, TRAIN, "--kvstore", "dist_sync", "--save", path] + common, env,
                "distributed run (%d workers, %d servers)" % (args.workers, args.servers))
            results["dist"] = np.load(path)
        path = os.path.join(tmp, "local.npz")
        run([PYTHON, TRAIN, "--kvstore", single, "--save", path] + common, env,
            "single-process run", quiet=bool(args.launcher))
        results["local"] = np.load(path)
        path = os.path.join(tmp, "shards.npz")
        run([PYTHON, TRAIN, "--kvstore", single, "--shards", str(args.workers),
             "--save", path] + common, env,
            "single-process run, %d gradients per key and step" % args.workers, quiet=True)
        results["local-shards"] = np.load(path)
        for name in ("local-shards", "dist"):
            if name in results:
                ok = compare(name, results[name], "local", results["local"], args) and ok
        if "dist" in results:
            same = all(np.array_equal(results["dist"][k], results["local-shards"][k])
                       for k in ("weight", "bias"))
            print("check_train: dist and local-shards weights are %s"
                  % ("bit-identical: ok" if same else "NOT bit-identical: FAILED"))
            ok = same and ok
        for name in results:
            acc = float(results[name]["test_accuracy"])
            if acc < args.min_accuracy:
                print("check_train: FAILED: %s accuracy %.4f < %.4f" % (name, acc,
                                                                        args.min_accuracy))
                ok = False
    print("check_train: %s" % ("all checks passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/python3
"""Runs train_digits.py distributed (W workers, S servers, through kvstore-launch) and in one
process (store `local`), then checks that both reach the accuracy bound and agree.

    check_train.py --library build/libkvstore.so [--launcher build/tools/kvstore-launch]
                   [--workers 2] [--servers 1] [--epochs 20] [--min-accuracy 0.93]
                   [--plot curves.png] [train_digits.py options, e.g. --hidden 128,128]

Three runs (two without --launcher): `dist` (the distributed job), `local` (one process, one
gradient per key and step over the whole batch) and `local-shards` (one process pushing W
gradients per key and step, one per worker share, which the store sums); the two
single-process runs run side by side.

- `local-shards` and `dist` agree with `local`: the final test accuracies differ by at most
  --accuracy-tolerance (default 0.01, i.e. 3 of the 357 test images) and every parameter by
  at most --weight-tolerance (default 1e-4). They differ only in the order of float32
  additions (a sum of per-worker sums against one sum over the batch): with 2 workers and 2
  servers and the defaults the MLP's parameters end within 1.4e-6 of each other after 5
  epochs (1024-wide hidden layers, scripts/run-main.sh) and within 2.4e-7 after 10
  (128-wide, the tests); softmax regression's within 3.6e-7 after 20 epochs (figures
  printed by this script).
- `dist` equals `local-shards` bit for bit: sync servers add the pushes of a round in
  worker-rank order, which is the order in which the local store adds the values of a push.
- With --compression 2bit|1bit (passed on to train_digits.py) the single-process runs use the
  `device` store (`local` does not compress). `dist` still equals `local-shards` bit for bit:
  each worker's push is quantised with its own residual as each value of a device push is,
  and both sums are float32 in rank order. `local` quantises one gradient over the whole
  batch instead, so its weights differ by more than rounding: pass a --weight-tolerance
  that says how much.

Then it prints one line of timings from rank 0 of `dist` and from `local`, over the epochs
after the first: the time per training step (gradient, push, pull), the share of it spent
inside the store's push and pull calls, and the ratio of the two step times. With --plot it
writes the loss and accuracy per epoch of both runs as a PNG (matplotlib, Agg backend); with
--profile the distributed run's nodes write their timelines, merged by kvstore-launch.
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
    run_all([(cmd, what)], env, quiet)


def run_all(runs, env, quiet):
    """Runs the (cmd, what) pairs at the same time and waits for all of them; exits when one
    fails. Output as for run()."""
    procs = []
    for cmd, what in runs:
        print("check_train: %s: %s" % (what, " ".join(cmd)))
        sys.stdout.flush()
        out = tempfile.TemporaryFile(mode="w+") if quiet else None
        procs.append((subprocess.Popen(cmd, env=env, stdout=out, stderr=out), out, what))
    failed = None
    for proc, out, what in procs:
        rc = proc.wait()
        if out is not None:
            out.seek(0)
            lines = out.read().splitlines()
            out.close()
            print("\n".join(lines if rc != 0 else lines[-1:]))
        if rc != 0:
            print("check_train: FAILED: %s exited with status %d" % (what, rc))
            failed = failed or what
    if failed:
        sys.exit(1)


def param_names(result):
    return sorted((k for k in result.files if k.startswith("param")), key=lambda k: int(k[5:]))


def compare(name_a, a, name_b, b, args):
    acc_a, acc_b = float(a["test_accuracy"]), float(b["test_accuracy"])
    dw = max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in param_names(a))
    ok = abs(acc_a - acc_b) <= args.accuracy_tolerance and dw <= args.weight_tolerance
    print("check_train: %s accuracy %.4f vs %s %.4f (|diff| %.4f, tolerance %.4f); "
          "max |parameter diff| %.3g (tolerance %.3g)%s: %s"
          % (name_a, acc_a, name_b, acc_b, abs(acc_a - acc_b), args.accuracy_tolerance, dw,
             args.weight_tolerance, " [bit-identical]" if dw == 0 else "",
             "ok" if ok else "FAILED"))
    return ok


def step_times(result):
    """(seconds per step, seconds inside push and pull per step) of rank 0, over the epochs
    after the first (which pays for first-touch allocations) when there are several."""
    skip = 1 if len(result["epoch_step_s"]) > 1 else 0
    steps = int(result["steps_per_epoch"]) * (len(result["epoch_step_s"]) - skip)
    step = float(result["epoch_step_s"][skip:].sum()) / steps
    store = float((result["epoch_push_s"][skip:] + result["epoch_pull_s"][skip:]).sum()) / steps
    return step, store


def summarize(results, args):
    """One line: time per step distributed and in one process, and the store's share."""
    parts = []
    local_step, local_store = step_times(results["local"])
    if "dist" in results:
        dist_step, dist_store = step_times(results["dist"])
        parts.append("dist (%d workers x %d servers) %.1f ms, store %.0f%% of it"
                     % (args.workers, args.servers, 1e3 * dist_step,
                        100 * dist_store / dist_step))
    parts.append("single-process %.1f ms, store %.0f%% of it"
                 % (1e3 * local_step, 100 * local_store / local_step))
    if "dist" in results:
        parts.append("dist/single-process %.2fx" % (dist_step / local_step))
    print("check_train: time per step (store = time inside push and pull calls): %s"
          % "; ".join(parts))


def plot(results, path, args):
    """Loss and accuracy per epoch of the dist and single-process runs, as a PNG."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("check_train: no plot: matplotlib is missing (Debian: python3-matplotlib)")
        return
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name, style in (("dist", "-"), ("local", "--")):
        if name not in results:
            continue
        r = results[name]
        epochs = np.arange(1, len(r["epoch_test_loss"]) + 1)
        label = "dist" if name == "dist" else "single-process"
        for ax, what in ((ax_loss, "loss"), (ax_acc, "accuracy")):
            ax.plot(epochs, r["epoch_train_" + what], style, marker="o", color="C0",
                    label=label + " train (running)")
            ax.plot(epochs, r["epoch_test_" + what], style, marker="o", color="C1",
                    label=label + " test")
    ax_loss.set_yscale("log")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy", title="loss")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy")
    for ax in (ax_loss, ax_acc):
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    title = "train_digits.py: %s" % results["local"]["model"]
    if "dist" in results:
        title += ("; dist: %d workers x %d servers (dist_sync), train figures over rank 0's "
                  "rows" % (args.workers, args.servers))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print("check_train: loss and accuracy curves written to %s" % os.path.abspath(path))


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
    ap.add_argument("--profile", metavar="JSON",
                    help="KVSTORE_PROFILE=JSON for the distributed run only: every node writes "
                         "its timeline and kvstore-launch merges them into JSON "
                         "(include/kvstore/kvstore.h, KVProfileStart)")
    ap.add_argument("--plot", metavar="PNG",
                    help="write the loss and accuracy curves of the runs here (matplotlib)")
    args, train_args = ap.parse_known_args(argv)

    env = dict(os.environ)
    env["KVSTORE_LIBRARY"] = os.path.abspath(args.library)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(SOURCE_DIR, "bindings", "python")] +
        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    for var in [v for v in env if v.startswith("DMLC_")]:
        del env[var]  # the local runs must not look like launched workers
    env.pop("KVSTORE_PROFILE", None)  # only --profile's, only for the distributed run
    common = ["--epochs", str(args.epochs), "--min-accuracy", str(args.min_accuracy)]
    common += train_args
    single = "device" if "--compression" in train_args else "local"  # local does not compress

    ok = True
    with tempfile.TemporaryDirectory(prefix="check_train.") as tmp:
        results = {}
        if args.launcher:
            path = os.path.join(tmp, "dist.npz")
            dist_env = dict(env)
            if args.profile:
                dist_env["KVSTORE_PROFILE"] = os.path.abspath(args.profile)
            run([args.launcher, "-n", str(args.workers), "-s", str(args.servers), "--",
                 PYTHON, TRAIN, "--kvstore", "dist_sync", "--save", path] + common, dist_env,
                "distributed run (%d workers, %d servers)" % (args.workers, args.servers))
            results["dist"] = np.load(path)
        # The two single-process runs run side by side, one core each (the Debian BLAS is
        # single-threaded), as the dist run's workers share the cores.
        local, shards = os.path.join(tmp, "local.npz"), os.path.join(tmp, "shards.npz")
        run_all([([PYTHON, TRAIN, "--kvstore", single, "--save", local] + common,
                  "single-process run"),
                 ([PYTHON, TRAIN, "--kvstore", single, "--shards", str(args.workers),
                   "--save", shards] + common,
                  "single-process run, %d gradients per key and step" % args.workers)],
                env, quiet=True)
        results["local"] = np.load(local)
        results["local-shards"] = np.load(shards)
        for name in ("local-shards", "dist"):
            if name in results:
                ok = compare(name, results[name], "local", results["local"], args) and ok
        if "dist" in results:
            same = all(np.array_equal(results["dist"][k], results["local-shards"][k])
                       for k in param_names(results["dist"]))
            print("check_train: dist and local-shards weights are %s"
                  % ("bit-identical: ok" if same else "NOT bit-identical: FAILED"))
            ok = same and ok
        for name in results:
            acc = float(results[name]["test_accuracy"])
            if acc < args.min_accuracy:
                print("check_train: FAILED: %s accuracy %.4f < %.4f" % (name, acc,
                                                                        args.min_accuracy))
                ok = False
        summarize(results, args)
        if args.plot:
            plot(results, args.plot, args)
        if args.profile and "dist" in results:
            print("check_train: merged timeline of the distributed run: %s"
                  % (os.path.abspath(args.profile) if os.path.exists(args.profile) else
                     "none written (a build without the profiler?)"))
    print("check_train: %s" % ("all checks passed" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/python3
"""Data-parallel training with libkvstore: softmax regression on the 8x8 handwritten digits.

Every worker holds the whole model (a 64x10 weight matrix and 10 biases, keys 0 and 1) and
the whole data set, but in each step computes the gradient only on its share of the global
batch (rows rank, rank + W, rank + 2W, ... of it, for W workers). It pushes the gradient sum;
the store adds the pushes of all workers and the server applies the built-in optimizer set
with set_optimizer (rescale_grad = 1/batch turns the sum into the batch mean); then every
worker pulls the new weights. The updates are therefore those of one process training on
the global batch, and a `local` run gives the same model up to float32 summation order.

Run in one process:
    PYTHONPATH=bindings/python KVSTORE_LIBRARY=build/libkvstore.so \\
        /usr/bin/python3 examples/train/train_digits.py --kvstore local
Run with 2 workers and 1 server (the store type defaults to dist_sync under the launcher):
    PYTHONPATH=bindings/python KVSTORE_LIBRARY=build/libkvstore.so \\
        build/tools/kvstore-launch -n 2 -s 1 -- /usr/bin/python3 examples/train/train_digits.py

With --dtype float16 the weights and the pushed gradients are float16; add
--multi-precision (the optimizer's multi_precision=1) and the store or the servers keep a
float32 master copy of each weight and sum the gradients in float32, returning the master
rounded to float16 on every pull (docs/OPTIMIZERS.md#multi-precision).

With --compression 2bit (or 1bit) every push is quantised with the reference's gradient
compression and a residual per key (error feedback): 16x (32x) fewer bytes per push on the
dist stores; in one process use --kvstore device, which quantises each pushed value on its
own (docs/DISTRIBUTED.md#gradient-compression).

Data: digits.csv.gz from Debian's python3-sklearn (1797 images, 64 pixels in 0..16, label),
read with gzip and numpy only. A fixed permutation puts 357 images in the test set and 1440
in the training set.
"""
import argparse
import gzip
import os
import sys
import time

import numpy as np

from kvstore import kv

DIGITS_CSV = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
NUM_FEATURES, NUM_CLASSES = 64, 10
KEY_WEIGHT, KEY_BIAS = 0, 1


def load_digits(path, num_test, seed):
    """(x_train, y_train, x_test, y_test); pixels scaled to [0, 1]."""
    if not os.path.exists(path):
        sys.exit("train_digits: %s not found; install the Debian package python3-sklearn "
                 "or pass --data PATH" % path)
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",", dtype=np.float64)
    if data.ndim != 2 or data.shape[1] != NUM_FEATURES + 1:
        sys.exit("train_digits: %s: expected %d columns, got shape %s"
                 % (path, NUM_FEATURES + 1, data.shape))
    x = data[:, :NUM_FEATURES] / 16.0
    y = data[:, NUM_FEATURES].astype(np.int64)
    perm = np.random.RandomState(seed).permutation(len(x))
    test, train = perm[:num_test], perm[num_test:]
    return x[train], y[train], x[test], y[test]


def forward(w, b, x):
    """Class probabilities (float64) of a softmax regression."""
    logits = x @ w.astype(np.float64) + b.astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    return p


def gradient_sum(w, b, x, y):
    """Sum over the rows of the cross-entropy gradient, in the weights' dtype (what is
    pushed)."""
    if len(x) == 0:
        return np.zeros_like(w), np.zeros_like(b)
    p = forward(w, b, x)
    p[np.arange(len(y)), y] -= 1.0
    return (x.T @ p).astype(w.dtype), p.sum(axis=0).astype(b.dtype)


def evaluate(w, b, x, y):
    """(mean cross-entropy, accuracy)."""
    p = forward(w, b, x)
    loss = -np.log(np.maximum(p[np.arange(len(y)), y], 1e-300)).mean()
    return loss, float((p.argmax(axis=1) == y).mean())


def optimizer_spec(args):
    params = ["learning_rate=%r" % args.lr, "wd=%r" % args.wd,
              "rescale_grad=%r" % (1.0 / args.batch_size)]
    if args.optimizer in ("sgd", "nag"):
        params.append("momentum=%r" % args.momentum)
    if args.multi_precision:
        params.append("multi_precision=1")
    return "%s(%s)" % (args.optimizer, ",".join(params))


def parse_args(argv):
    launched = "DMLC_ROLE" in os.environ
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kvstore", default="dist_sync" if launched else "local",
                    help="store type (default: dist_sync when started by a launcher that "
                         "sets DMLC_ROLE, else local)")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=48,
                    help="global batch, split over the workers (default 48)")
    ap.add_argument("--optimizer", default="sgd",
                    choices=["sgd", "nag", "adam", "adagrad", "rmsprop"])
    ap.add_argument("--shards", type=int, default=1,
                    help="gradients pushed per key and step by each worker, each computed on "
                         "its own part of the worker's rows (as one per device); the store "
                         "sums them (default 1)")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16"],
                    help="dtype of the weights and of the pushed gradients (default float32)")
    ap.add_argument("--multi-precision", action="store_true",
                    help="multi_precision=1: float16 weights keep a float32 master copy in "
                         "the store or on the servers, which sum the gradients in float32")
    ap.add_argument("--compression", choices=["2bit", "1bit"],
                    help="gradient compression of the pushes (dist_* and device stores)")
    ap.add_argument("--compression-threshold", type=float, default=0.5,
                    help="its threshold (default 0.5, the reference's)")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--wd", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--num-test", type=int, default=357)
    ap.add_argument("--data", default=DIGITS_CSV)
    ap.add_argument("--save", metavar="NPZ",
                    help="rank 0 writes the final weights, bias and accuracies here")
    ap.add_argument("--min-accuracy", type=float, default=None,
                    help="exit with status 1 if the final test accuracy is below this")
    args = ap.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.shards < 1:
        ap.error("--epochs, --batch-size and --shards must be positive")
    return args


def main(argv):
    args = parse_args(argv)
    store = kv.create(args.kvstore)
    if kv.is_server_node() or kv.is_scheduler_node():
        # A launcher that runs this command for every role (as MXNet's launch.py does):
        # servers and the scheduler only serve; the workers ship the optimizer to them.
        store.run_server()
        store.close()
        return 0

    rank, num_workers = store.rank, store.num_workers
    x_train, y_train, x_test, y_test = load_digits(args.data, args.num_test, args.seed)
    if args.batch_size > len(x_train):
        sys.exit("train_digits: --batch-size %d exceeds the %d training images"
                 % (args.batch_size, len(x_train)))
    steps = len(x_train) // args.batch_size  # a last incomplete batch is left out
    parts = num_workers * args.shards

    # The same initial weights on every worker (in a dist store rank 0's init is the one
    # kept); the bias starts at zero.
    w = (np.random.RandomState(args.seed + 1).randn(NUM_FEATURES, NUM_CLASSES) * 0.01)
    w = w.astype(args.dtype)
    b = np.zeros(NUM_CLASSES, dtype=args.dtype)
    spec = optimizer_spec(args)
    store.set_optimizer(spec)
    if args.compression:
        store.set_gradient_compression({"type": args.compression,
                                        "threshold": args.compression_threshold})
    store.init([KEY_WEIGHT, KEY_BIAS], [w, b])
    store.pull([KEY_WEIGHT, KEY_BIAS], out=[w, b])

    if rank == 0:
        print("train_digits: store %s, %d worker(s), optimizer %s" % (store.type, num_workers,
                                                                      spec))
        print("train_digits: %d training / %d test images, batch %d in %d part(s) "
              "(%d per worker), %d steps per epoch"
              % (len(x_train), len(x_test), args.batch_size, parts, args.shards, steps))
        sys.stdout.flush()
    start = time.time()
    for epoch in range(args.epochs):
        # Every worker draws the same permutation, so the global batches agree.
        order = np.random.RandomState(args.seed + 100 + epoch).permutation(len(x_train))
        for step in range(steps):
            batch = order[step * args.batch_size:(step + 1) * args.batch_size]
            # Part p of P = workers * shards holds rows p, p + P, ... of the batch; this
            # worker's parts are rank * shards ... rank * shards + shards - 1.
            grads = [gradient_sum(w, b, x_train[rows], y_train[rows])
                     for rows in (batch[p::parts] for p in range(rank * args.shards,
                                                                   (rank + 1) * args.shards))]
            store.push([KEY_WEIGHT, KEY_BIAS], [[g[0] for g in grads], [g[1] for g in grads]])
            store.pull([KEY_WEIGHT, KEY_BIAS], out=[w, b])
        if rank == 0:
            loss, train_acc = evaluate(w, b, x_train, y_train)
            _, test_acc = evaluate(w, b, x_test, y_test)
            print("epoch %3d  train loss %.4f  train accuracy %.4f  test accuracy %.4f  "
                  "(%.1fs)" % (epoch + 1, loss, train_acc, test_acc, time.time() - start))
            sys.stdout.flush()

    _, test_acc = evaluate(w, b, x_test, y_test)
    print("rank %d/%d: final test accuracy %.4f (store %s)" % (rank, num_workers, test_acc,
                                                              store.type))
    if args.save and rank == 0:
        np.savez(args.save, weight=w, bias=b, test_accuracy=test_acc, parts=parts,
                 store=store.type)
    store.close()
    if args.min_accuracy is not None and test_acc < args.min_accuracy:
        print("train_digits: final test accuracy %.4f is below --min-accuracy %.4f"
              % (test_acc, args.min_accuracy), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

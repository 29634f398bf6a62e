#!/usr/bin/python3
"""Data-parallel training with libkvstore: an MLP (or softmax regression) on the 8x8 digits.

Every worker holds the whole model and the whole data set, but in each step computes the
gradient only on its share of the global batch (rows rank, rank + W, rank + 2W, ... of it,
for W workers). It pushes the gradient sums of all parameters in one call; the store adds the
pushes of all workers and the servers apply the built-in optimizer set with set_optimizer
(rescale_grad = 1/batch turns the sum into the batch mean); then every worker pulls every
parameter in one call. The updates are therefore those of one process training on the global
batch, and a `local` run gives the same model up to float32 summation order.

Models (--model):
  mlp      (default) 64 -> 1024 -> 1024 -> 10 with ReLU, 1,126,410 parameters in six keys
           (key 2k: weight of layer k, key 2k+1: its bias; --hidden sets the widths). With
           S servers an int key lives on server key % S, and the 1024x1024 weight (1,048,576
           elements, above the default big-array bound of 1,000,000) is split by rows over
           all servers (docs/DISTRIBUTED.md), so both servers of a 2-server job hold data and
           run the optimizer.
  softmax  softmax regression: a 64x10 weight and 10 biases (keys 0 and 1).

Run in one process:
    PYTHONPATH=bindings/python KVSTORE_LIBRARY=build/libkvstore.so \\
        /usr/bin/python3 examples/train/train_digits.py --kvstore local
Run with 2 workers and 2 servers (the store type defaults to dist_sync under the launcher):
    PYTHONPATH=bindings/python KVSTORE_LIBRARY=build/libkvstore.so \\
        build/tools/kvstore-launch -n 2 -s 2 -- /usr/bin/python3 examples/train/train_digits.py

Rank 0 prints a line per epoch: the running train loss and accuracy (over the rows this
worker computed gradients on during the epoch, with the weights of each step), the test loss
and accuracy after the epoch, the samples per second of the whole job, and the mean step time
with the share of it spent inside the store's push and pull calls. --save writes these
figures and the final weights to an .npz file (check_train.py compares and plots them).

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
# docs/DISTRIBUTED.md: keys with at least this many elements are split over the servers.
BIGARRAY_BOUND_VARS = ("MXNET_KVSTORE_BIGARRAY_BOUND", "KVSTORE_BIGARRAY_BOUND")
DEFAULT_BIGARRAY_BOUND = 1000000


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


def softmax_loss(logits, y):
    """(class probabilities, summed cross-entropy, number of correct predictions) in
    float64."""
    logits = logits.astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.log(np.maximum(p[np.arange(len(y)), y], 1e-300)).sum()
    return p, loss, int((p.argmax(axis=1) == y).sum())


class Model(object):
    """A stack of dense layers: layer k has weight key 2k (fan_in x fan_out) and bias key
    2k + 1; ReLU between layers, softmax cross-entropy after the last. Without hidden layers
    it is softmax regression, computed in float64 as before the MLP existed (its float32
    agreement figures in check_train.py depend on it); with hidden layers the products are
    float32 (the Debian BLAS is the reference one: float64 would double the step)."""

    def __init__(self, hidden, dtype):
        self.sizes = [NUM_FEATURES] + list(hidden) + [NUM_CLASSES]
        self.dtype = np.dtype(dtype)
        self.compute = np.float64 if not hidden else np.float32
        self.keys = list(range(2 * (len(self.sizes) - 1)))

    def init_params(self, seed):
        """The same initial values on every worker (in a dist store rank 0's init is the one
        kept): softmax weights N(0, 0.01^2) as before, MLP weights He-scaled; biases zero."""
        rng = np.random.RandomState(seed + 1)
        params = []
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:]):
            scale = 0.01 if len(self.sizes) == 2 else np.sqrt(2.0 / fan_in)
            params.append((rng.randn(fan_in, fan_out) * scale).astype(self.dtype))
            params.append(np.zeros(fan_out, dtype=self.dtype))
        return params

    def _forward(self, params, x):
        """Activations entering each layer, and the logits."""
        acts = [x.astype(self.compute)]
        n = len(self.sizes) - 1
        for k in range(n):
            z = acts[-1] @ params[2 * k].astype(self.compute) + params[2 * k + 1].astype(
                self.compute)
            if k + 1 < n:
                acts.append(np.maximum(z, 0))
            else:
                return acts, z

    def gradient_sum(self, params, x, y):
        """(gradients summed over the rows, in the parameters' dtype, which is what is
        pushed; summed loss; correct predictions)."""
        if len(x) == 0:
            return [np.zeros_like(p) for p in params], 0.0, 0
        acts, logits = self._forward(params, x)
        p, loss, correct = softmax_loss(logits, y)
        p[np.arange(len(y)), y] -= 1.0
        delta = p.astype(self.compute)
        grads = [None] * len(params)
        for k in reversed(range(len(self.sizes) - 1)):
            grads[2 * k] = (acts[k].T @ delta).astype(self.dtype)
            grads[2 * k + 1] = delta.sum(axis=0).astype(self.dtype)
            if k > 0:
                delta = (delta @ params[2 * k].astype(self.compute).T) * (acts[k] > 0)
        return grads, loss, correct

    def evaluate(self, params, x, y):
        """(mean cross-entropy, accuracy)."""
        _, logits = self._forward(params, x)
        _, loss, correct = softmax_loss(logits, y)
        return loss / len(y), correct / len(y)


def bigarray_bound():
    for var in BIGARRAY_BOUND_VARS:
        if os.environ.get(var):
            return int(os.environ[var])
    return DEFAULT_BIGARRAY_BOUND


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
    ap.add_argument("--model", default="mlp", choices=["mlp", "softmax"])
    ap.add_argument("--hidden", default="1024,1024",
                    help="widths of the MLP's hidden layers (default 1024,1024)")
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
    ap.add_argument("--lr", type=float, default=None,
                    help="learning rate (default 0.05 for mlp, 0.1 for softmax)")
    ap.add_argument("--momentum", type=float, default=None,
                    help="momentum of sgd and nag (default 0.8 for mlp, 0.9 for softmax: "
                         "with 0.1 and 0.9 the MLP's test loss jumps now and then)")
    ap.add_argument("--wd", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--num-test", type=int, default=357)
    ap.add_argument("--data", default=DIGITS_CSV)
    ap.add_argument("--save", metavar="NPZ",
                    help="rank 0 writes the final weights, the per-epoch figures and the "
                         "step timings here")
    ap.add_argument("--min-accuracy", type=float, default=None,
                    help="exit with status 1 if the final test accuracy is below this")
    args = ap.parse_args(argv)
    if args.epochs < 1 or args.batch_size < 1 or args.shards < 1:
        ap.error("--epochs, --batch-size and --shards must be positive")
    try:
        args.hidden = [int(h) for h in args.hidden.split(",") if h.strip()]
    except ValueError:
        ap.error("--hidden takes comma-separated widths, e.g. 1024,1024")
    if args.lr is None:
        args.lr = 0.1 if args.model == "softmax" else 0.05
    if args.momentum is None:
        args.momentum = 0.9 if args.model == "softmax" else 0.8
    if args.model == "softmax":
        args.hidden = []
    elif not args.hidden or min(args.hidden) < 1:
        ap.error("--hidden needs at least one positive width for --model mlp")
    return args


def describe_keys(model, params, num_servers):
    """One line per key: shape, elements, and the server(s) that hold it."""
    bound = bigarray_bound()
    lines = []
    for key, p in zip(model.keys, params):
        if num_servers > 1 and p.size >= bound:
            where = "split by rows over all %d servers (>= bound %d)" % (num_servers, bound)
        elif num_servers > 0:
            where = "server %d" % (key % num_servers)
        else:
            where = "this process"
        lines.append("  key %d  %-10s %9d elements  %s"
                     % (key, "x".join(str(d) for d in p.shape), p.size, where))
    return lines


def train_epoch(store, model, params, x, y, order, steps, args):
    """One epoch of synchronous steps; params hold the pulled weights after each step.
    Returns this worker's (summed loss, correct predictions, rows) and the seconds spent in
    whole steps, in push calls and in pull calls."""
    rank, parts = store.rank, store.num_workers * args.shards
    loss_sum, correct, seen = 0.0, 0, 0
    step_s = push_s = pull_s = 0.0
    for step in range(steps):
        t0 = time.perf_counter()
        batch = order[step * args.batch_size:(step + 1) * args.batch_size]
        # Part p of P = workers * shards holds rows p, p + P, ... of the batch; this worker's
        # parts are rank * shards ... rank * shards + shards - 1.
        grads = []
        for p in range(rank * args.shards, (rank + 1) * args.shards):
            rows = batch[p::parts]
            g, loss, ok = model.gradient_sum(params, x[rows], y[rows])
            grads.append(g)
            loss_sum, correct, seen = loss_sum + loss, correct + ok, seen + len(rows)
        # One push of every key (the values of a key: one per shard), one pull of every key:
        # the store sees the whole model in each call.
        t1 = time.perf_counter()
        store.push(model.keys, [[g[i] for g in grads] for i in range(len(model.keys))])
        t2 = time.perf_counter()
        store.pull(model.keys, out=params)  # returns once the outputs hold the new values
        t3 = time.perf_counter()
        step_s += t3 - t0
        push_s += t2 - t1
        pull_s += t3 - t2
    return loss_sum, correct, seen, step_s, push_s, pull_s


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

    model = Model(args.hidden, args.dtype)
    params = model.init_params(args.seed)
    keys = model.keys
    spec = optimizer_spec(args)
    store.set_optimizer(spec)
    if args.compression:
        store.set_gradient_compression({"type": args.compression,
                                        "threshold": args.compression_threshold})
    store.init(keys, params)
    store.pull(keys, out=params)

    description = "%s %s, %d parameters" % (args.model, "-".join(str(s) for s in model.sizes),
                                            sum(p.size for p in params))
    if rank == 0:
        servers = int(os.environ.get("DMLC_NUM_SERVER", "0")) if store.type.startswith(
            "dist") else 0
        print("train_digits: %s in %d keys, store %s, %d worker(s)%s, optimizer %s"
              % (description, len(keys), store.type, num_workers,
                 ", %d server(s)" % servers if servers else "", spec))
        print("\n".join(describe_keys(model, params, servers)))
        print("train_digits: %d training / %d test images, batch %d in %d part(s) "
              "(%d per worker), %d steps per epoch"
              % (len(x_train), len(x_test), args.batch_size, parts, args.shards, steps))
        sys.stdout.flush()

    # Per epoch (rank 0's view; --save writes them as epoch_<name>): running train
    # loss/accuracy over this worker's rows, test loss/accuracy, seconds of training, and the
    # sums of step and store-call times.
    history = {k: [] for k in ("train_loss", "train_accuracy", "test_loss", "test_accuracy",
                               "seconds", "samples_per_s", "step_s", "push_s", "pull_s")}
    start = time.time()
    for epoch in range(args.epochs):
        # Every worker draws the same permutation, so the global batches agree.
        order = np.random.RandomState(args.seed + 100 + epoch).permutation(len(x_train))
        epoch_start = time.perf_counter()
        loss_sum, correct, seen, step_s, push_s, pull_s = train_epoch(
            store, model, params, x_train, y_train, order, steps, args)
        seconds = time.perf_counter() - epoch_start
        if rank == 0:
            test_loss, test_acc = model.evaluate(params, x_test, y_test)
            figures = dict(train_loss=loss_sum / seen, train_accuracy=correct / seen,
                           test_loss=test_loss, test_accuracy=test_acc, seconds=seconds,
                           samples_per_s=steps * args.batch_size / seconds, step_s=step_s,
                           push_s=push_s, pull_s=pull_s)
            for k, v in figures.items():
                history[k].append(v)
            print("epoch %3d  train loss %.4f acc %.4f  test loss %.4f acc %.4f  "
                  "%6.0f samples/s  step %6.1f ms (store %2.0f%%)  [%.1fs]"
                  % (epoch + 1, figures["train_loss"], figures["train_accuracy"], test_loss,
                     test_acc, figures["samples_per_s"], 1e3 * step_s / steps,
                     100.0 * (push_s + pull_s) / step_s, time.time() - start))
            sys.stdout.flush()

    test_loss, test_acc = model.evaluate(params, x_test, y_test)
    print("rank %d/%d: final test accuracy %.4f (store %s)" % (rank, num_workers, test_acc,
                                                              store.type))
    if args.save and rank == 0:
        np.savez(args.save, test_accuracy=test_acc, parts=parts, store=store.type,
                 model=description, steps_per_epoch=steps, num_workers=num_workers,
                 **{"param%d" % k: p for k, p in zip(keys, params)},
                 **{"epoch_" + k: np.array(v) for k, v in history.items()})
    store.close()
    if args.min_accuracy is not None and test_acc < args.min_accuracy:
        print("train_digits: final test accuracy %.4f is below --min-accuracy %.4f"
              % (test_acc, args.min_accuracy), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

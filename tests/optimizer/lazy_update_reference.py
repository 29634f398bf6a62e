"""The reference's numbers for tests/optimizer/test_lazy_update.cc.

Runs MXNet 1.9.1's Python optimizers (mx.optimizer.SGD / Adam, lazy_update=True, as a
kvstore updater runs them) on a dense weight with row_sparse gradients, several steps with
different rows, and prints the weights and states after the last step as C++ initialisers
(float32: 9 significant digits, float64: 17, both round-trip exactly).

    /tmp/mxvenv/bin/python tests/optimizer/lazy_update_reference.py
"""
import mxnet as mx
import numpy as np

ROWS, COLS = 6, 4
# The row ids pushed at each step ([] is a push of no rows: adam still counts the step).
STEPS = [[1, 4], [0, 1, 5], [], [4, 5]]
# Lazy steps interleaved with dense ones (a dense gradient of every row).
INTERLEAVED = [[1, 4], "dense", [0, 4], "dense"]


def weight0(dtype):
    return (np.arange(ROWS * COLS, dtype=np.float64).reshape(ROWS, COLS) * 0.37 - 4.1) \
        .astype(np.float32).astype(dtype)


def grad(step, rows, dtype):
    # Values exact in float16, so the same gradient reaches a float16 key's float32 sum.
    if rows == "dense":
        return mx.nd.array(grad(step, list(range(ROWS)), dtype).asnumpy(), dtype=dtype)
    g = np.array([[((step * 7 + r * 5 + c * 3) % 11 - 5) * 0.25 for c in range(COLS)]
                  for r in rows], dtype=np.float64).reshape(len(rows), COLS)
    return mx.nd.sparse.row_sparse_array((g.astype(dtype), np.array(rows, dtype=np.int64)),
                                         shape=(ROWS, COLS), dtype=dtype)


def run(name, kwargs, dtype, mp=False, steps=STEPS):
    opt = mx.optimizer.create(name, lazy_update=True, multi_precision=mp, **kwargs)
    wdtype = 'float16' if mp else dtype
    w = mx.nd.array(weight0(wdtype), dtype=wdtype)
    state = opt.create_state_multi_precision(0, w)
    for step, rows in enumerate(steps):
        g = grad(step, rows, wdtype)
        opt.update_multi_precision(0, w, g, state)
    return w, state


def fmt(a, digits):
    return ", ".join("%.*g" % (digits, v) for v in np.asarray(a, dtype=np.float64).ravel())


def show(label, name, kwargs, dtype, mp=False, steps=STEPS):
    w, state = run(name, kwargs, dtype, mp, steps)
    digits = 17 if dtype == 'float64' else 9
    print("// %s: %s(%s), %s%s, steps %s" % (label, name, kwargs, dtype,
                                           ", multi_precision" if mp else "", steps))
    if mp:
        print("weight16 = {%s};" % ", ".join("0x%04x" % v for v in
                                               w.asnumpy().view(np.uint16).ravel()))
        master, inner = state
        print("master = {%s};" % fmt(master.asnumpy(), 9))
        state = inner
    else:
        print("weight = {%s};" % fmt(w.asnumpy(), digits))
    states = [] if state is None else list(state) if isinstance(state, tuple) else [state]
    for i, s in enumerate(states):
        print("state%d = {%s};" % (i, fmt(s.asnumpy(), digits)))


if __name__ == "__main__":
    show("sgd", "sgd", dict(learning_rate=0.1, wd=0.01, rescale_grad=0.5), 'float32')
    show("sgd_clip", "sgd", dict(learning_rate=0.1, wd=0.01, clip_gradient=0.3), 'float32')
    show("sgd_momentum", "sgd", dict(learning_rate=0.1, momentum=0.9, wd=0.01, rescale_grad=0.5),
         'float32')
    show("sgd_momentum_clip", "sgd", dict(learning_rate=0.1, momentum=0.9, wd=0.01,
                                          rescale_grad=0.5, clip_gradient=0.3), 'float32')
    show("adam", "adam", dict(learning_rate=0.01, wd=0.01, rescale_grad=0.5), 'float32')
    show("adam_clip", "adam", dict(learning_rate=0.01, wd=0.01, rescale_grad=0.5,
                                   clip_gradient=0.2), 'float32')
    show("sgd_momentum_f64", "sgd", dict(learning_rate=0.1, momentum=0.9, wd=0.01,
                                         clip_gradient=0.3), 'float64')
    show("adam_f64", "adam", dict(learning_rate=0.01, wd=0.01, clip_gradient=0.2), 'float64')
    show("adam_mp", "adam", dict(learning_rate=0.01, wd=0.01, clip_gradient=0.2), 'float32',
         mp=True)
    show("sgd_momentum_clip_interleaved", "sgd", dict(learning_rate=0.1, momentum=0.9, wd=0.01,
         rescale_grad=0.5, clip_gradient=0.3), 'float32', steps=INTERLEAVED)
    show("adam_clip_interleaved", "adam", dict(learning_rate=0.01, wd=0.01, rescale_grad=0.5,
         clip_gradient=0.2), 'float32', steps=INTERLEAVED)
    show("adam_mp_interleaved", "adam", dict(learning_rate=0.01, wd=0.01, clip_gradient=0.2),
         'float32', mp=True, steps=INTERLEAVED)

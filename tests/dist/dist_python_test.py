"""A dist_sync job driven from the Python binding (bindings/python, ctypes).

Run by kvstore-launch for the workers (servers run kvstore-server). Each worker pushes
ones*(rank+1) to string keys (small and sharded with the bound at 1000 elements, fp32 and
fp16); after round i with the `test` optimizer (rescale_grad=2) every worker must pull
exactly 1 + n(n+1)/2*2*(i+1).
Before that, a worker refuses Python updaters (they run on the servers): set_updater raises
NotSupportedError, the library never calls the free hook of the refused registration, and
the binding releases it exactly once (nothing left registered, the callable collectable).
Then worker 0 saves the optimizer states of the job and loads them back.
Prints "PASS python rank R".
"""
import sys
import weakref

import numpy as np

import kvstore
from kvstore import _callback, kv, nd

assert kvstore.has_feature("dist"), "libkvstore was built without the distributed stores"
assert kv.is_worker_node()

store = kv.create("dist_sync")
rank, n = store.rank, store.num_workers
assert store.type == "dist_sync", store.type
assert 0 <= rank < n

hooks, live = _callback.free_hook_calls(), _callback.live_registrations()


def updater(key, recv, stored):
    stored += recv


updater_ref = weakref.ref(updater)
for setter in (store.set_updater, store._set_str_updater):
    try:
        setter(updater)
        sys.exit("FAIL rank %d: %s on a dist worker succeeded" % (rank, setter.__name__))
    except kvstore.NotSupportedError as e:
        assert "updater" in str(e), str(e)
if _callback.free_hook_calls() != hooks:
    sys.exit("FAIL rank %d: the library called the free hook of a refused updater %d time(s)"
             % (rank, _callback.free_hook_calls() - hooks))
if _callback.live_registrations() != live:
    sys.exit("FAIL rank %d: %d refused registration(s) left registered"
             % (rank, _callback.live_registrations() - live))
del updater
if updater_ref() is not None:
    sys.exit("FAIL rank %d: the refused updater is still referenced" % rank)

keys = ["embed.weight", "fc.bias", "fc.weight.fp16"]
shapes = [(40, 50), (9,), (1200,)]
dtypes = [np.float32, np.float32, np.float16]

store.set_optimizer("test(rescale_grad=2)")
store.init(keys, [nd.ones(s, dtype=d) for s, d in zip(shapes, dtypes)])
outs = [nd.zeros(s, dtype=d) for s, d in zip(shapes, dtypes)]
for r in range(3):
    store.push(keys, [nd.ones(s, dtype=d) * (rank + 1) for s, d in zip(shapes, dtypes)])
    store.pull(keys, out=outs)
    want = 1 + n * (n + 1) / 2 * 2 * (r + 1)
    for k, o in zip(keys, outs):
        got = o.asnumpy()
        if not np.all(got == want):
            sys.exit("FAIL rank %d round %d key %s: got %s, want %s" % (rank, r, k, got.ravel()[:4], want))

# Optimizer states: worker 0 gathers the servers' state (of every part of the sharded keys)
# into one file and sends it back; every worker's pull still sees the same values.
store.barrier()
if rank == 0:
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "states.kvos")
        store.save_optimizer_states(path)
        with open(path, "rb") as f:
            assert f.read(8) == b"KVOSTATE"
        store.load_optimizer_states(path)
store.barrier()

# Errors surface as the binding's exception classes.
try:
    store.pull("never.inited", out=outs[1])
    sys.exit("FAIL: pulling an unknown key succeeded")
except kvstore.KVStoreError as e:
    assert "never.inited" in str(e), str(e)

store.barrier()
assert store.num_dead_node(1 + 2 + 4, 60) == 0
store.close()
print("PASS python rank %d" % rank)

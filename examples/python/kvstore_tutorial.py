#!/usr/bin/env python3
"""The "KVStore API" tutorial (shared/seeds/python-kvstore.md), run with the kvstore binding.

It prints exactly what the tutorial prints. The tutorial was written for Python 2 and an
old numpy, whose arrays print as ``[[ 2.  2.  2.] ...]``; numpy's legacy='1.13' print mode
reproduces that layout. The tutorial pushes from four GPUs: where the library sees no GPU
(KVGetGpuCount is 0) the same code runs on four CPU contexts, which gives the same numbers
(a note says so on stderr); with 1..3 GPUs the four contexts share them round-robin.

Run:  KVSTORE_LIBRARY=build/libkvstore.so /usr/bin/python3 examples/python/kvstore_tutorial.py
"""
import sys

import numpy

import _setup_path  # noqa: F401
from kvstore import cpu, gpu, kv, nd, num_gpus

numpy.set_printoptions(legacy="1.13")


def device(i):
    n = num_gpus()
    return gpu(i % n) if n else cpu(i)


if num_gpus() == 0:
    print("note: no GPU available; the tutorial's gpu(i) contexts run as cpu(i)",
          file=sys.stderr)

# ### Initialization
kv = kv.create('local')  # create a local kv store.
shape = (2, 3)
kv.init(3, nd.ones(shape) * 2)
a = nd.zeros(shape)
kv.pull(3, out=a)
print(a.asnumpy())

# ### Push, Aggregation, and Updater
kv.push(3, nd.ones(shape) * 8)
kv.pull(3, out=a)  # pull out the value
print(a.asnumpy())

gpus = [device(i) for i in range(4)]
b = [nd.ones(shape, gpu) for gpu in gpus]
kv.push(3, b)
kv.pull(3, out=a)
print(a.asnumpy())


def update(key, input, stored):
    print("update on key: %d" % key)
    stored += input * 2


kv._set_updater(update)
kv.pull(3, out=a)
print(a.asnumpy())
kv.push(3, nd.ones(shape))
kv.pull(3, out=a)
print(a.asnumpy())

# ### Pull
b = [nd.ones(shape, gpu) for gpu in gpus]
kv.pull(3, out=b)
print(b[1].asnumpy())

# ## List Key-Value Pairs
keys = [5, 7, 9]
kv.init(keys, [nd.ones(shape)] * len(keys))
kv.push(keys, [nd.ones(shape)] * len(keys))
b = [nd.zeros(shape)] * len(keys)
kv.pull(keys, out=b)
print(b[1].asnumpy())

# For multiple devices:
b = [[nd.ones(shape, gpu) for gpu in gpus]] * len(keys)
kv.push(keys, b)
kv.pull(keys, out=b)
print(b[1][1].asnumpy())

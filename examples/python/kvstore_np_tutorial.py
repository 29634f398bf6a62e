#!/usr/bin/env python3
"""The numpy-flavoured "KV Store" tutorial (shared/seeds/python-np-kvstore.md), run with the
kvstore binding.

The tutorial is a notebook: a cell's last bare expression is displayed with repr(), which
this script does with show(). It prints what the notebook shows, in order, with two notes:

- Cell [6] shows ``C[0]`` as ``[[-3. -3. -3.] ...]``, the str() form, while every other cell
  shows the repr() form ``array(...)``; we print that one with print() so the text matches.
- The last cell (updater) is inconsistent in the tutorial itself. It displays ``A`` as
  ``array([[3., 3., 3.], ...])`` - that is the value pulled *before* the push, shown although
  ``A`` is not the cell's last expression - and it omits both the updater's
  "update on key: 3" line and the output of its own final ``print(A.asnumpy())``. It also
  pushes ``mx.nd.ones(shape) * 5`` although ``mx`` was never imported; we push
  ``np.ones(shape) * 5``, the same value. We print the 3s the tutorial shows, then what the
  rest of the cell really prints: the updater's line and stored = 3 + 5 * 0.01 = 3.05.

Run:  KVSTORE_LIBRARY=build/libkvstore.so /usr/bin/python3 examples/python/kvstore_np_tutorial.py
"""
import _setup_path  # noqa: F401
from kvstore import cpu, kv, np


def show(x):
    """What a notebook displays for a cell's last expression."""
    print(repr(x))


# In [1]:
kv = kv.create('device')

# In [2]:
shape = (2, 3)
kv.init(3, np.ones(shape) * (-2))
A = np.zeros(shape)
kv.pull(3, out=A)
show(A)

# In [3]:
kv.push(3, np.ones(shape) * (-7))
kv.pull(3, out=A)
show(A)

# In [5]:
contexts = [cpu(i) for i in range(3)]
B = [np.ones(shape, ctx=ctx) for ctx in contexts]
kv.push(3, B)
kv.pull(3, out=A)
# A has a shape (2,3), while B has a 3 x (2,3) on each CPU, then a sums along CPUs
show(A)

# In [6]:
keys = [7, 11, 13, 17]
values = [np.ones(shape) * (-3)] * len(keys)
kv.init(keys, values)

C = [np.zeros(shape)] * len(keys)
kv.pull(keys, out=C)
print(C[0])  # Output the value of the first key (the notebook shows its str() form)

# In [23]:
D = [[np.ones(shape, ctx=ctx) * (-0.1) for ctx in contexts]] * len(keys)
print("D[0] : ", D[0])

kv.push(keys, D)
kv.pull(keys, out=C)
show(C[0])  # Output the value of the first key


# In [9]:
def update(key, input, stored):
    print("update on key: %d" % key)
    stored += input * 0.01


kv._set_updater(update)
kv.pull(3, out=A)
show(A)  # Since we haven't called "push", the value of A doesn't change

kv.push(3, np.ones(shape) * 5)
kv.pull(3, out=A)
print(A.asnumpy())  # We called push through the new updater with an input equals to 5

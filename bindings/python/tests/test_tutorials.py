"""C1: seed tutorial replay.

The example scripts in examples/python must print exactly the tutorials' output; the
expected transcripts below are the tutorials' printed lines (and, where the seed files are
available beside the repository in shared/seeds, they are checked against those files too).
The same steps are also asserted directly through the API.
"""
import os
import re
import subprocess
import sys

import numpy
import pytest

import kvstore
from kvstore import cpu, gpu, kv, nd, np
from conftest import REPO_ROOT, subprocess_env

EXAMPLES = os.path.join(REPO_ROOT, "examples", "python")
SEEDS = os.path.join(os.path.dirname(REPO_ROOT), "shared", "seeds")

# What shared/seeds/python-kvstore.md prints (numpy 1.13 layout, as in the tutorial).
KVSTORE_TUTORIAL_OUTPUT = """\
[[ 2.  2.  2.]
 [ 2.  2.  2.]]
[[ 8.  8.  8.]
 [ 8.  8.  8.]]
[[ 4.  4.  4.]
 [ 4.  4.  4.]]
[[ 4.  4.  4.]
 [ 4.  4.  4.]]
update on key: 3
[[ 6.  6.  6.]
 [ 6.  6.  6.]]
[[ 6.  6.  6.]
 [ 6.  6.  6.]]
update on key: 5
update on key: 7
update on key: 9
[[ 3.  3.  3.]
 [ 3.  3.  3.]]
update on key: 5
update on key: 7
update on key: 9
[[ 11.  11.  11.]
 [ 11.  11.  11.]]
"""

# What shared/seeds/python-np-kvstore.md shows, followed by the three lines its last cell
# really prints (the tutorial omits them; see the example's docstring): the updater's line
# and stored = 3 + 5 * 0.01.
NP_TUTORIAL_SHOWN = """\
array([[-2., -2., -2.],
       [-2., -2., -2.]])
array([[-7., -7., -7.],
       [-7., -7., -7.]])
array([[3., 3., 3.],
       [3., 3., 3.]])
[[-3. -3. -3.]
 [-3. -3. -3.]]
D[0] :  [array([[-0.1, -0.1, -0.1],
       [-0.1, -0.1, -0.1]]), array([[-0.1, -0.1, -0.1],
       [-0.1, -0.1, -0.1]]), array([[-0.1, -0.1, -0.1],
       [-0.1, -0.1, -0.1]])]
array([[-0.3, -0.3, -0.3],
       [-0.3, -0.3, -0.3]])
array([[3., 3., 3.],
       [3., 3., 3.]])
"""
NP_TUTORIAL_OUTPUT = NP_TUTORIAL_SHOWN + """\
update on key: 3
[[3.05 3.05 3.05]
 [3.05 3.05 3.05]]
"""


def run_example(name):
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=subprocess_env(), cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode(), proc.stderr.decode()


def test_c1_kvstore_tutorial_script_prints_the_tutorial():
    out, err = run_example("kvstore_tutorial.py")
    assert out == KVSTORE_TUTORIAL_OUTPUT
    if kvstore.num_gpus() == 0:
        assert "run as cpu(i)" in err


def test_c1_np_tutorial_script_prints_the_tutorial():
    out, _ = run_example("kvstore_np_tutorial.py")
    assert out == NP_TUTORIAL_OUTPUT


def _seed(name):
    path = os.path.join(SEEDS, name)
    if not os.path.isfile(path):
        pytest.skip("seed %s not available beside the repository" % path)
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_c1_transcript_matches_seed_python_kvstore():
    text = _seed("python-kvstore.md")
    printed = []
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        printed += [line for line in block.splitlines() if line and not line.startswith(">>>")]
    assert printed == KVSTORE_TUTORIAL_OUTPUT.splitlines()


def test_c1_transcript_matches_seed_python_np_kvstore():
    text = _seed("python-np-kvstore.md")
    shown = [line for line in text.splitlines()
             if re.match(r"(array\(|\s+\[|\[\[|D\[0\] : )", line)]
    assert shown == NP_TUTORIAL_SHOWN.splitlines()


def _devices(n):
    count = kvstore.num_gpus()
    return [gpu(i % count) if count else cpu(i) for i in range(n)]


def test_c1_kvstore_tutorial_numbers_through_the_api(capsys):
    shape = (2, 3)
    with kv.create("local") as store:
        store.init(3, nd.ones(shape) * 2)
        a = nd.zeros(shape)
        store.pull(3, out=a)
        assert numpy.array_equal(a.asnumpy(), numpy.full(shape, 2, numpy.float32))
        store.push(3, nd.ones(shape) * 8)
        store.pull(3, out=a)
        assert numpy.array_equal(a.asnumpy(), numpy.full(shape, 8))
        gpus = _devices(4)
        store.push(3, [nd.ones(shape, g) for g in gpus])
        store.pull(3, out=a)
        assert numpy.array_equal(a.asnumpy(), numpy.full(shape, 4))

        calls = []

        def update(key, input, stored):
            calls.append(key)
            stored += input * 2

        store._set_updater(update)
        store.pull(3, out=a)
        assert numpy.array_equal(a.asnumpy(), numpy.full(shape, 4)) and calls == []
        store.push(3, nd.ones(shape))
        assert calls == [3]
        store.pull(3, out=a)
        assert numpy.array_equal(a.asnumpy(), numpy.full(shape, 6))

        b = [nd.ones(shape, g) for g in gpus]
        store.pull(3, out=b)
        for x in b:
            assert numpy.array_equal(x.asnumpy(), numpy.full(shape, 6))

        keys = [5, 7, 9]
        store.init(keys, [nd.ones(shape)] * len(keys))
        assert calls == [3]  # the updater never runs at init
        store.push(keys, [nd.ones(shape)] * len(keys))
        assert calls == [3, 5, 7, 9]
        b = [nd.zeros(shape) for _ in keys]
        store.pull(keys, out=b)
        for x in b:
            assert numpy.array_equal(x.asnumpy(), numpy.full(shape, 3))

        b = [[nd.ones(shape, g) for g in gpus]] * len(keys)
        store.push(keys, b)
        assert calls == [3, 5, 7, 9, 5, 7, 9]
        store.pull(keys, out=b)
        for row in b:
            for x in row:
                assert numpy.array_equal(x.asnumpy(), numpy.full(shape, 11))


def test_c1_np_tutorial_numbers_through_the_api():
    shape = (2, 3)
    with kv.create("device") as store:
        assert store.type == "device"
        store.init(3, np.ones(shape) * (-2))
        A = np.zeros(shape)
        store.pull(3, out=A)
        assert isinstance(A, np.ndarray)
        assert numpy.array_equal(A.asnumpy(), numpy.full(shape, -2))
        store.push(3, np.ones(shape) * (-7))
        store.pull(3, out=A)
        assert numpy.array_equal(A.asnumpy(), numpy.full(shape, -7))
        contexts = [cpu(i) for i in range(3)]
        store.push(3, [np.ones(shape, ctx=c) for c in contexts])
        store.pull(3, out=A)
        assert numpy.array_equal(A.asnumpy(), numpy.full(shape, 3))

        keys = [7, 11, 13, 17]
        store.init(keys, [np.ones(shape) * (-3)] * len(keys))
        C = [np.zeros(shape) for _ in keys]
        store.pull(keys, out=C)
        for c in C:
            assert numpy.array_equal(c.asnumpy(), numpy.full(shape, -3))
        D = [[np.ones(shape, ctx=c) * (-0.1) for c in contexts]] * len(keys)
        store.push(keys, D)
        store.pull(keys, out=C)
        minus_tenth = numpy.float32(-0.1)
        for c in C:
            assert numpy.array_equal(c.asnumpy(), numpy.full(shape, minus_tenth * 3,
                                                             numpy.float32))

        seen = []

        def update(key, input, stored):
            seen.append((key, type(input).__name__, type(stored).__name__))
            stored += input * 0.01

        store._set_updater(update)
        store.pull(3, out=A)
        assert numpy.array_equal(A.asnumpy(), numpy.full(shape, 3)) and seen == []
        store.push(3, np.ones(shape) * 5)
        store.pull(3, out=A)
        # np-flavoured stores hand np arrays to the updater
        assert seen == [(3, "ndarray", "ndarray")]
        expected = numpy.float32(3) + numpy.float32(5) * numpy.float32(0.01)
        assert numpy.array_equal(A.asnumpy(), numpy.full(shape, expected, numpy.float32))
        assert repr(A) == "array([[3.05, 3.05, 3.05],\n       [3.05, 3.05, 3.05]])"

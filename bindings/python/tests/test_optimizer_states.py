"""save_optimizer_states / load_optimizer_states: resuming from a saved state is bit-identical
to training on; a bad file raises the library's precise error and changes nothing; the file
is the documented language-neutral format (docs/OPTIMIZER-STATES.md), read here with nothing
but struct and zlib."""
import struct
import zlib

import numpy
import pytest

import kvstore
from kvstore import kv, nd

SPEC = "adam(learning_rate=0.01,wd=0.001)"
SHAPES = {0: (2, 3), 5: (4,)}


def job(spec=SPEC, weights=None):
    store = kv.create("local")
    store.set_optimizer(spec)
    for k, shape in SHAPES.items():
        w = weights[k] if weights is not None else numpy.arange(numpy.prod(shape),
                                                                   dtype=numpy.float32)
        store.init(k, nd.array(numpy.asarray(w, dtype=numpy.float32).reshape(shape)))
    return store


def train(store, steps, first=0):
    for step in range(first, first + steps):
        for k, shape in SHAPES.items():
            g = numpy.sin(numpy.arange(numpy.prod(shape)) * (step + 1) + k).astype(numpy.float32)
            store.push(k, nd.array(g.reshape(shape)))


def weights(store):
    out = {}
    for k, shape in SHAPES.items():
        a = nd.zeros(shape)
        store.pull(k, out=a)
        out[k] = a.asnumpy()
    return out


def test_resume_is_bit_identical(tmp_path):
    path = tmp_path / "states.kvos"
    with job() as whole:
        train(whole, 5)
        want = weights(whole)
    with job() as first:
        train(first, 3)
        first.save_optimizer_states(path, dump_optimizer=True)  # accepted, ignored
        saved = weights(first)
    with job(weights=saved) as second:
        second.load_optimizer_states(str(path))
        train(second, 2, first=3)
        got = weights(second)
    for k in SHAPES:
        assert got[k].tobytes() == want[k].tobytes()


def test_file_is_the_documented_format(tmp_path):
    path = tmp_path / "states.kvos"
    with job() as store:
        train(store, 2)
        store.save_optimizer_states(path)
    data = path.read_bytes()
    magic, version, flags, body_len, body_crc, header_crc = struct.unpack_from("<8sIIQII", data)
    assert (magic, version, flags) == (b"KVOSTATE", 1, 0)
    assert header_crc == zlib.crc32(data[:28])
    body = data[32:]
    assert len(body) == body_len and body_crc == zlib.crc32(body)
    pos = 0

    def take(fmt):
        nonlocal pos
        vals = struct.unpack_from(fmt, body, pos)
        pos += struct.calcsize(fmt)
        return vals

    def string():
        (n,) = take("<I")
        return take("<%ds" % n)[0].decode()

    assert string() == "adam"
    assert string().startswith("adam(learning_rate=0.01,")
    kind, num_keys = take("<IQ")
    assert (kind, num_keys) == (1, 2)  # int keys
    for key in sorted(SHAPES):
        k, dtype, ndim = take("<iiI")
        shape = take("<%dq" % ndim)
        steps, num_arrays = take("<qI")
        assert (k, dtype, shape, steps, num_arrays) == (key, 0, SHAPES[key], 2, 2)  # mean, var
        for _ in range(num_arrays):
            adtype, andim = take("<iI")
            ashape = take("<%dq" % andim)
            (nbytes,) = take("<Q")
            assert (adtype, ashape, nbytes) == (0, SHAPES[key], 4 * numpy.prod(SHAPES[key]))
            assert numpy.any(numpy.frombuffer(body, numpy.float32, nbytes // 4, pos) != 0)
            pos += nbytes
    assert pos == len(body)


def test_bad_files_change_nothing(tmp_path):
    good = tmp_path / "good.kvos"
    bad = tmp_path / "bad.kvos"
    with job() as other:
        train(other, 1)
        other.save_optimizer_states(good)
    data = good.read_bytes()
    with job() as whole:
        train(whole, 5)
        want = weights(whole)
    with job() as store:
        train(store, 3)
        corrupt = bytearray(data)
        corrupt[-1] ^= 1
        bad.write_bytes(bytes(corrupt))
        with pytest.raises(kvstore.InvalidArgumentError, match="body checksum"):
            store.load_optimizer_states(bad)
        bad.write_bytes(data[:-8])
        with pytest.raises(kvstore.InvalidArgumentError, match="truncated"):
            store.load_optimizer_states(bad)
        with job(spec="sgd(learning_rate=0.1,momentum=0.9)") as sgd:
            sgd.save_optimizer_states(bad)
        with pytest.raises(kvstore.InvalidArgumentError, match="holds the state of sgd"):
            store.load_optimizer_states(bad)
        with pytest.raises(ValueError, match="NUL"):
            store.load_optimizer_states("states\0.kvos")
        train(store, 2, first=3)
        for k, w in weights(store).items():
            assert w.tobytes() == want[k].tobytes()


def test_without_optimizer_is_not_supported(tmp_path):
    with kv.create("local") as store:
        store.init(0, nd.ones((2,)))
        with pytest.raises(kvstore.NotSupportedError, match="no optimizer"):
            store.save_optimizer_states(tmp_path / "x.kvos")
        store.set_updater(lambda key, inp, stored: None)
        with pytest.raises(kvstore.NotSupportedError, match="callback updater"):
            store.load_optimizer_states(tmp_path / "x.kvos")

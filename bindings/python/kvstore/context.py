"""Device contexts: ``cpu(i)`` and ``gpu(i)``, as in ``mx.cpu`` / ``mx.gpu``."""
import ctypes

from ._lib import LIB
from .errors import check_call

__all__ = ["Context", "cpu", "gpu", "num_gpus", "current_context"]

KV_CPU = 1
KV_GPU = 2


class Context(object):
    """A device: ``Context('cpu', 0)``, ``Context('gpu', 1)``, or ``Context(other)``."""

    devtype2str = {KV_CPU: "cpu", KV_GPU: "gpu"}
    devstr2type = {"cpu": KV_CPU, "gpu": KV_GPU}
    __slots__ = ("device_typeid", "device_id")

    def __init__(self, device_type, device_id=0):
        if isinstance(device_type, Context):
            self.device_typeid = device_type.device_typeid
            self.device_id = device_type.device_id
            return
        if isinstance(device_type, str):
            if device_type not in self.devstr2type:
                raise ValueError("unknown device type %r; expected 'cpu' or 'gpu'" % device_type)
            typeid = self.devstr2type[device_type]
        elif isinstance(device_type, int) and not isinstance(device_type, bool):
            if device_type not in self.devtype2str:
                raise ValueError("unknown device type id %d; expected 1 (cpu) or 2 (gpu)"
                                 % device_type)
            typeid = device_type
        else:
            raise TypeError("device_type must be 'cpu', 'gpu' or a Context, not %s"
                            % type(device_type).__name__)
        if not isinstance(device_id, int) or isinstance(device_id, bool):
            raise TypeError("device_id must be an int, not %s" % type(device_id).__name__)
        if device_id < 0:
            raise ValueError("device_id must be >= 0, got %d" % device_id)
        self.device_typeid = typeid
        self.device_id = device_id

    @property
    def device_type(self):
        """'cpu' or 'gpu'."""
        return self.devtype2str[self.device_typeid]

    def __eq__(self, other):
        return (isinstance(other, Context) and self.device_typeid == other.device_typeid
                and self.device_id == other.device_id)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((self.device_typeid, self.device_id))

    def __repr__(self):
        return "%s(%d)" % (self.device_type, self.device_id)

    __str__ = __repr__


def cpu(device_id=0):
    """A CPU context. All CPU contexts share host memory."""
    return Context("cpu", device_id)


def gpu(device_id=0):
    """A GPU context. Creating an array on it fails with DeviceError when the GPU does not
    exist (see :func:`num_gpus`)."""
    return Context("gpu", device_id)


def num_gpus():
    """Number of usable GPUs (0 without CUDA, driver or device)."""
    count = ctypes.c_int(0)
    check_call(LIB.KVGetGpuCount(ctypes.byref(count)))
    return count.value


def current_context():
    """The default context of new arrays: cpu(0)."""
    return Context("cpu", 0)

"""``kvstore.optimizer``: the built-in optimizers as objects, as ``mx.optimizer``.

    >>> from kvstore import kv, optimizer
    >>> store = kv.create('local')
    >>> store.set_optimizer(optimizer.SGD(learning_rate=0.1, momentum=0.9, wd=1e-4))

An object stands for a spec string (``str(opt)`` or ``opt.spec``:
``"sgd(learning_rate=0.1,momentum=0.9,wd=0.0001)"``), and ``KVStore.set_optimizer`` takes
either. The update rules run in the library (docs/OPTIMIZERS.md); these classes only name
them. Each class takes, as keywords, exactly the parameters of its spec (an alias such as
``lr`` for ``learning_rate`` counts as its parameter); ``None`` means "not given" (the
library's default, e.g. no clipping for ``clip_gradient=None``), and booleans (``centered``,
``multi_precision``, ``lazy_update``) are given as True/False.

``SGD`` and ``Adam`` take ``lazy_update`` (the library's default is True, as the reference's):
a row_sparse push then updates only the pushed rows of the weight and of the optimizer state;
``lazy_update=False`` applies the push densely, so weight decay and momentum move every row
(docs/OPTIMIZERS.md, "Row-sparse gradients: lazy updates"). Like the reference's ``NAG``,
``AdaGrad`` and ``RMSProp``, the other classes do not take it (TypeError).

Errors come at construction, never at ``set_optimizer``: an unknown keyword or positional
arguments raise TypeError; a value the library refuses (out of range, not finite) raises
:class:`~kvstore.errors.InvalidArgumentError`, a ValueError, with the library's message. The
values are checked by installing the spec on a scratch ``local`` store, so the binding and
the library can never disagree about what a spec accepts.

Not here (as in the library): learning-rate schedulers, ``lr_mult``/``wd_mult`` and the
other reference arguments that have no spec parameter; passing them is a TypeError.
"""
import math
import numbers

__all__ = ["Optimizer", "SGD", "NAG", "Adam", "AdaGrad", "RMSProp", "Test", "create"]

# Parameters every optimizer but `test` takes (docs/OPTIMIZERS.md, "Common parameters").
_COMMON = ("learning_rate", "wd", "rescale_grad", "clip_gradient")
# float16 weights keep a float32 master copy; every optimizer takes it, rendered only when
# True (False is the library's default).
_MULTI_PRECISION = "multi_precision"
# Row-sparse pushes update only their rows (sgd and adam only; the library's default is 1).
_LAZY_UPDATE = "lazy_update"
# The parameters sgd and nag share, in the order they are rendered.
_MOMENTUM = ("learning_rate", "momentum", "wd", "rescale_grad", "clip_gradient")


class Optimizer(object):
    """A built-in optimizer with its parameters; ``spec`` is its spec string.

    Subclasses set ``name`` (the spec's optimizer name), ``_params`` (the spec's parameter
    names, in the order they are rendered) and ``_aliases`` (alias -> parameter)."""

    name = None
    _params = ()
    _aliases = {}
    _flags = (_MULTI_PRECISION, "centered", _LAZY_UPDATE)  # True/False, rendered as 1/0

    def __init__(self, **kwargs):
        if type(self) is Optimizer:
            raise TypeError("Optimizer is abstract; use SGD, NAG, Adam, AdaGrad, RMSProp, "
                            "Test or create(name, ...)")
        given = {}
        spelled = {}
        for key, value in kwargs.items():
            param = self._aliases.get(key, key)
            if param not in self._params:
                raise TypeError("%s() got an unexpected keyword argument %r; its parameters: %s"
                                % (type(self).__name__, key, self._describe_params()))
            if param in spelled:
                raise TypeError("%s(): parameter %r given twice (as %r and %r)"
                                % (type(self).__name__, param, spelled[param], key))
            spelled[param] = key
            if value is None:
                continue
            given[param] = self._check_value(key, param, value)
        self._values = given
        self.spec = self._render()
        _check_spec(self.spec)

    @classmethod
    def _describe_params(cls):
        names = []
        for p in cls._params:
            alias = [a for a, target in cls._aliases.items() if target == p]
            names.append(p + (" (alias %s)" % ", ".join(alias) if alias else ""))
        return ", ".join(names)

    def _check_value(self, key, param, value):
        if param in self._flags:
            if not isinstance(value, (bool, numbers.Integral)) or value not in (0, 1):
                raise TypeError("%s(): %s must be True or False, not %r"
                                % (type(self).__name__, key, value))
            return bool(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError("%s(): %s must be a real number, not %s (%r)"
                            % (type(self).__name__, key, type(value).__name__, value))
        return value

    @staticmethod
    def _number(value):
        if isinstance(value, numbers.Integral):
            return str(int(value))
        # repr of a float is the shortest decimal that reads back to the same double; the
        # library reads it in the C locale. inf and nan render as such and are refused there.
        value = float(value)
        return repr(value) if math.isfinite(value) else str(value)

    def _render(self):
        parts = []
        for p in self._params:
            if p not in self._values:
                continue
            v = self._values[p]
            if p in self._flags:
                if p == _MULTI_PRECISION and not v:
                    continue  # the default; a library without multi-precision accepts it
                parts.append("%s=%d" % (p, 1 if v else 0))
            else:
                parts.append("%s=%s" % (p, self._number(v)))
        return "%s(%s)" % (self.name, ",".join(parts)) if parts else self.name

    @property
    def params(self):
        """The parameters given (aliases under their parameter's name), as a dict."""
        return dict(self._values)

    def __getattr__(self, attr):
        # Reference code reads opt.learning_rate, opt.momentum, ...: a given parameter's value,
        # None for one left to the library's default.
        values = self.__dict__.get("_values")
        if values is not None:
            param = self._aliases.get(attr, attr)
            if param in self._params:
                return values.get(param)
        raise AttributeError("%r object has no attribute %r" % (type(self).__name__, attr))

    def __str__(self):
        return self.spec

    def __repr__(self):
        args = ", ".join("%s=%r" % (p, self._values[p]) for p in self._params
                         if p in self._values)
        return "%s(%s)" % (type(self).__name__, args)

    def __eq__(self, other):
        return isinstance(other, Optimizer) and other.spec == self.spec

    def __hash__(self):
        return hash(self.spec)


def _check_spec(spec):
    """Raises the library's InvalidArgumentError when it refuses spec."""
    from . import kv  # kv imports this module
    with kv.create("local") as scratch:
        scratch.set_optimizer(spec)


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (spec ``sgd``)."""
    name = "sgd"
    _params = _MOMENTUM + (_LAZY_UPDATE, _MULTI_PRECISION)
    _aliases = {"lr": "learning_rate"}


class NAG(Optimizer):
    """Nesterov accelerated gradient (spec ``nag``)."""
    name = "nag"
    _params = _MOMENTUM + (_MULTI_PRECISION,)
    _aliases = {"lr": "learning_rate"}


class Adam(Optimizer):
    """Adam (spec ``adam``)."""
    name = "adam"
    _params = ("learning_rate", "beta1", "beta2", "epsilon") + _COMMON[1:] + \
        (_LAZY_UPDATE, _MULTI_PRECISION)
    _aliases = {"lr": "learning_rate"}


class AdaGrad(Optimizer):
    """AdaGrad (spec ``adagrad``); ``eps`` as in MXNet 1.9.1, ``epsilon`` as in 2.0."""
    name = "adagrad"
    _params = ("learning_rate", "eps") + _COMMON[1:] + (_MULTI_PRECISION,)
    _aliases = {"lr": "learning_rate", "epsilon": "eps"}


class RMSProp(Optimizer):
    """RMSProp, plain or centred (spec ``rmsprop``); ``rho`` is MXNet 2.0's ``gamma1``."""
    name = "rmsprop"
    _params = ("learning_rate", "gamma1", "gamma2", "epsilon", "centered", "clip_weights") + \
        _COMMON[1:] + (_MULTI_PRECISION,)
    _aliases = {"lr": "learning_rate", "rho": "gamma1"}


class Test(Optimizer):
    """``w += rescale_grad * g`` (spec ``test``; exact, also for integer weights)."""
    name = "test"
    _params = ("rescale_grad", _MULTI_PRECISION)
    __test__ = False  # not a pytest test class


_REGISTRY = {cls.name: cls for cls in (SGD, NAG, Adam, AdaGrad, RMSProp, Test)}


def create(name, **kwargs):
    """The optimizer called name (case-insensitive: 'sgd', 'adam', ...) with kwargs, as
    ``mx.optimizer.create``. An unknown name raises ValueError listing the known ones."""
    if not isinstance(name, str):
        raise TypeError("optimizer name must be a str, not %s" % type(name).__name__)
    cls = _REGISTRY.get(name.lower())
    if cls is None:
        raise ValueError("unknown optimizer %r; known: %s" % (name, ", ".join(sorted(_REGISTRY))))
    return cls(**kwargs)

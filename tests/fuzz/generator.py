"""Random small Python programs over tensors and Python values, as source text.

``generate(seed, index, features)`` returns a :class:`Program`: a module prelude (globals, a
helper or two, a plain class, an ``nn.Module``), the function under test ``f(x, y, n, xs, ts)``
as a tree of statements, and a script of steps (calls with input specs, and state mutations run
in the program's namespace between calls).  Everything is drawn from ``random.Random(program_seed(seed,
index))``, so one program is regenerated from ``(seed, index)`` alone.

A typed environment (variable -> kind, tensors with a symbolic shape such as ``("B", "C")``)
keeps programs mostly valid: operands broadcast, indices exist, loops end.  Programs that do
raise are fine: the exception is part of what eager and optimized runs must agree on.

Every statement kind, expression family and step kind belongs to a named feature in
:data:`FEATURES`; ``known_bug`` features are switched off in the in-suite run (``SAFE_FEATURES``)
until the bugs they expose are fixed, and are on in ``python -m bench.fuzz`` by default.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Optional

# name: (weight, known_bug, what it generates)
FEATURES: dict[str, tuple[float, bool, str]] = {
    "tensor_ops":      (6.0, False, "t = <elementwise/binary/reduction/shape op over tensors>"),
    "int_arith":       (3.0, False, "python int/float arithmetic, shape reads, len, min/max/abs"),
    "if_python":       (2.5, False, "if/else on python values, x.shape[0], x.dim(), len(list), isinstance, in"),
    "for_range":       (1.5, False, "for i in range(k) with an accumulator"),
    "for_list":        (1.5, False, "for over a list / enumerate / zip / dict.items()"),
    "while_loop":      (0.8, False, "while with a counter"),
    "list_build":      (1.5, False, "list literals, list(range()), list of tensors"),
    "list_mutation":   (2.0, False, "append, extend, insert, pop, item store, del, sort, reverse on locals"),
    "arg_list_mutation": (1.5, False, "append/pop/item store on the caller's list xs"),
    "arg_list_iadd":   (0.7, False, "xs += [..] / xs *= 2 on the caller's list"),
    "dict_ops":        (1.5, False, "dict literals, item store/pop, get, update, 'k' in d"),
    "dict_views":      (0.6, False, "d.keys()/values()/items() kept as values (live views)"),
    "unpacking":       (1.2, False, "tuple unpacking, swaps, star-unpacking"),
    "comprehension":   (1.2, False, "list/dict comprehensions and generator expressions in sum/any/all"),
    "helper_calls":    (1.5, False, "calls of module-level helpers with defaults/kwargs/*args"),
    "object_methods":  (1.2, False, "method calls, attribute reads and property reads on a plain object"),
    "object_stores":   (1.0, False, "attribute stores on the plain object (some of what f made: an object, a lambda, a bound method)"),
    "module_calls":    (1.2, False, "calling an nn.Module (parameter, buffer, sub-layer), its attributes"),
    "module_stores":   (0.8, False, "attribute stores on the nn.Module"),
    "global_stores":   (0.8, False, "global scalar rebinding, global list/dict mutation"),
    "buffer_updates":  (0.8, False, "a cache module (KV-cache style): its buffers written in place at rows from python "
                                    "ints and tensors (setitem, index_copy_, +=, zero_; some in a try whose handler "
                                    "catches NotImplementedError or TypeError, as transformers' static cache), a "
                                    "python position advanced, a "
                                    "tensor attribute grown by cat and rebound, read back in slices; between calls "
                                    "buffers refilled, replaced, retyped, the position reset"),
    "nn_layers":       (0.8, False, "torch.nn layers on two columns of a tensor: Linear, LayerNorm, BatchNorm1d and "
                                    "GroupNorm (running statistics in training mode), Embedding, Dropout, GRU, "
                                    "Conv1d; between calls train()/eval(), momentum, weights scaled in place"),
    "module_tree":     (0.8, False, "a nested model (ModuleList, ModuleDict, Sequential, ParameterList): called, its "
                                    "containers iterated, indexed, counted, its parameters() summed; between calls "
                                    "submodules appended, replaced, deleted, patched (forward, __class__), parameters "
                                    "replaced or retyped (.data, double()), hooks added and removed"),
    "inplace_local":   (1.2, False, "in-place ops (add_, mul_, +=, setitem) on local tensors"),
    "inplace_arg":     (1.0, False, "in-place ops on the input tensors and on views of them"),
    "slicing":         (1.2, False, "x[:, 1:], x[0], x[..., :1], x[::2], list slices"),
    "early_return":    (0.6, False, "if <cond>: return ..."),
    "print":           (0.15, False, "print of python values"),
    "is_compare":      (0.5, False, "`is` / `is not` between containers, None checks"),
    "min_max_sorted":  (0.6, False, "min/max/sorted over python lists (no key)"),
    "minmax_key":      (0.4, False, "min/max/sorted with a key function"),
    "lazy_iterators":  (0.4, False, "zip/map/enumerate objects kept and consumed later, zip(strict=True)"),
    "loop_mutation":   (0.3, False, "for-loop over a list that the loop body appends to"),
    "dataclass":       (0.1, False, "dataclass instances built and compared with =="),
    "library_state":   (0.4, False, "a torch function held in object state (obj.act = torch.relu) then swapped"),
    "class_attr":      (0.4, False, "class attributes read via type(obj) / the class, changed between calls"),
    "default_dtype":   (0.2, False, "torch.set_default_dtype changed between calls; factories without dtype"),
    "data_dependent":  (0.15, False, ".item(), bool(tensor), if on tensor values (should fall back)"),
    "graph_raises":    (0.2, False, "a side effect followed by a kernel that raises at run time"),
    "factories":       (0.8, False, "torch.tensor(xs), arange(n), full_like(x, n), new_ones, zeros(B) from python values"),
    "tensor_iter":     (0.5, False, "unbind/split/chunk, for row in x, list(x)"),
    "attr_probe":      (0.5, False, "hasattr/getattr(default)/setattr/delattr on the object"),
    "random_ops":      (0.3, False, "rand_like, randn, dropout (the RNG is reseeded before each call); LayerDrop's "
                                    "`if torch.rand([]) < p` with p in {0.0, 1.0, 0.5, -1, 2} (decided without the data "
                                    "outside (0, 1)), the draw written in place first sometimes"),
    "metadata_inplace": (0.3, False, "x.t_(), x.unsqueeze_(0), requires_grad_ on inputs"),
    "graph_breaks":    (2.0, False, "break-inducing statements: print of tensors between tensor blocks, if on a "
                                    "tensor, .item()/float()/bool() in python arithmetic, unmodelled C calls, breaks "
                                    "in with no_grad, in an inlined helper, after pending side effects, two in a row, "
                                    "an eager instruction that raises"),
    "try_except":      (0.8, False, "try/except KeyError/IndexError/ZeroDivisionError around code that may raise"),
    "grad_mode":       (0.6, False, "with torch.no_grad()/enable_grad()/inference_mode() blocks; grad mode flipped "
                                    "between calls"),
    "autocast":        (0.4, False, "with torch.autocast('cpu', dtype, enabled) blocks around a matmul and other "
                                    "statements; the caller's CPU autocast region turned on/off and its dtype changed "
                                    "between calls"),
    "grad_reads":      (0.4, True, "backward() through the module's parameter, then its .grad read (None or a "
                                   "tensor, accumulated over calls), used, written in place, an SGD step on "
                                   "the parameter; zero_grad() between calls (known bug X71 on the XLA "
                                   "backends: a second backward through a replayed step's output)"),
    "closures":        (0.6, False, "nested functions and lambdas closing over locals (arguments too), called in f; "
                                    "a nested function writing a local through nonlocal, read later (after breaks)"),
    "sets_strings":    (0.5, False, "set(), len(set()), f-strings, str methods, tuple(t.shape)"),
    "frame_builtins":  (0.3, False, "calls that read f's own frame: globals()[...] = ..., eval, len(locals()), "
                                    "sys._getframe().f_code.co_name, type(name, bases, ns).__module__"),
    "const_reads":     (0.5, False, "tensors made from python values only (arange, tensor, div on ints), written "
                                    "in place sometimes (through views too), then read: int(), .item(), list[t], "
                                    "if on their value, as a size"),
    "iter_functional": (0.8, False, "helper generator functions (yield, yield from, early return) consumed by for, "
                                    "list(), next(), sum() and unpacking, or kept and consumed later; itertools "
                                    "(chain, product, accumulate, islice, repeat, pairwise, starmap, count); "
                                    "functools.partial/reduce; operator.itemgetter/attrgetter/add/mul; the walrus "
                                    "operator (in if, while, comprehensions) -- over ints and tensors; a partial, an "
                                    "itemgetter, a chain and a count made and kept past a print"),
    "index_ops":       (1.2, False, "ops whose answer is an index or follows one: gather/scatter by argsort, index_select, "
                                    "advanced indexing, argmax/argmin, topk, sort, masked_fill, softmax, one_hot, "
                                    "flip/roll/tril, layer_norm, pad, diff, a boolean mask (data-dependent shape)"),
    "python_identity": (0.6, False, "values that CPython's tests watch: a set of strings grown and shrunk, then "
                                    "iterated/printed/popped after a break (table order); one tuple/set/slice/list "
                                    "under two names across a break (`is`, a change through one name); "
                                    "tuple(t) is t; bound-method equality; a nested function's __name__"),
    "user_ctx":        (0.6, False, "with-blocks over a user's context manager (a class, one held in a global, a "
                                    "contextlib.contextmanager generator, one whose __enter__ prints, torch's "
                                    "record_function, a threading.Lock, contextlib.suppress, one whose __exit__ reads its "
                                    "traceback), logging enter/exit to a global, some swallowing a KeyError/IndexError the "
                                    "block raises"),
    "user_raise":      (0.6, False, "the program's own raise, caught in f or a helper: a plain exception class (a "
                                    "built-in one, a subclass that adds nothing, one with its own __init__), raise "
                                    "... from, a bare re-raise, a raise crossing a no_grad block, a failed assert, a "
                                    "generator's return value read from StopIteration.value, str(e) and e.args"),
    "match_stmt":      (0.4, False, "match statements over n, xs, G_DICT and tuples: literal, or-, capture, "
                                    "sequence (with *rest), mapping (with **rest), class (int(v), str(), Obj(k=...)) "
                                    "patterns and guards"),
    "tensor_attrs":    (0.4, False, "Python attributes stored on tensors made in f and on the inputs (t.tag = k, "
                                    "mark_static(t) as mark_static_address tags a cache tensor), read back with "
                                    "getattr/hasattr, the tensors returned or kept in lists"),
    "class_protocols": (0.4, False, "code a class runs on attribute access: a Python descriptor that caches "
                                    "into the instance (torch.distributions' lazy_property), a data descriptor "
                                    "with a setter, __slots__ read/stored/deleted, a namedtuple with its own "
                                    "__new__ ending in super().__new__ (PackedSequence), tuple.__new__; between "
                                    "calls the cache dropped, the descriptor's methods and the __new__ replaced"),
    "own_protocols":   (0.5, False, "a container whose __iter__ is Python (a list's iterator, a generator) walked by for, "
                                    "sum, unpacking, zip and `in`; a counter closure made outside f (nonlocal) called "
                                    "in f; a types.SimpleNamespace counted and compared; a context manager switching "
                                    "grad mode with torch._C._set_grad_enabled; between calls the items changed, "
                                    "__iter__ replaced, the counter remade, the namespace reset"),
    "stdlib_more":     (0.4, False, "bounded deques (local and a global one), Enum(value), OrderedDict.move_to_end, "
                                    "a functools.cached_property (dropped between reads), logging records "
                                    "(funcName, lineno, message kept), str() of a dict, a break inside a loop "
                                    "over a global dict"),
    # input-set variations (not statements)
    "vary_shape":      (1.0, False, "calls with another B or C"),
    "vary_dtype":      (1.0, False, "calls with float64 inputs"),
    "vary_python":     (1.0, False, "calls with another n, another xs (values and length)"),
    "reuse_args":      (1.0, False, "calls with the very same argument objects again"),
    "state_mutation":  (1.0, False, "mutations of globals/object/module/helpers between calls"),
    "arg_aliasing":    (0.3, False, "y is x / ts holds x in one call"),
    "tensor_views":    (0.3, False, "x an offset view / requires_grad leaf / with an attribute hiding a method / a view of a leaf, made under no_grad, one of several or of an activation, in one call"),
    "special_values":  (0.5, False, "calls whose x or y holds a NaN, an infinity, -0.0 or 1e30"),
    "vary_grad":       (1.0, False, "x requires grad from the first call on, or from a later one (the oracle then "
                                    "compares the gradients of the results too)"),
    "second_order":    (1.0, False, "the oracle also differentiates a penalty on the gradients it compares (taken "
                                    "with create_graph=True, as WGAN-GP does) in some programs' calls"),
    # a value domain XLA leaves implementation-defined (a modifier of the ops above; off on the device)
    "zero_divisors":   (1.0, False, "integer //, %, fmod by a tensor or an int that may be 0 (without: made nonzero)"),
    "host_sources":    (1.0, False, "t.copy_(torch.tensor(0.5)): a host source (without: made on t's device)"),
}

ALL_FEATURES = frozenset(FEATURES)
SAFE_FEATURES = frozenset(name for name, (_, bug, _) in FEATURES.items() if not bug)

# Features off in device mode (``--device xla``), where no fair comparison exists: XLA draws its
# random numbers from its own generator, seeded apart from ``torch.manual_seed``; XLA's integer
# division by zero is implementation-defined where eager raises (tests/fuzz/README.md, "Device mode").
DEVICE_OFF = {"cpu": frozenset(), "xla": frozenset({"random_ops", "zero_divisors", "host_sources"})}


def features_for(features: frozenset, device: str) -> frozenset:
    return frozenset(features) - DEVICE_OFF[device]


def program_seed(seed: int, index: int) -> int:
    return seed * 1_000_003 + index


# ----------------------------------------------------------------------------- program tree


@dataclasses.dataclass
class Stmt:
    """One statement: ``lines`` (its header or the whole simple statement), and for compound
    statements ``body`` (and ``orelse`` for if/else)."""
    lines: list[str]
    body: Optional[list["Stmt"]] = None
    orelse: Optional[list["Stmt"]] = None
    orelse_header: str = "else:"

    def render(self, indent: str, out: list[str]) -> None:
        for line in self.lines:
            out.append(indent + line)
        if self.body is not None:
            render_block(self.body, indent + "    ", out)
        if self.orelse is not None:
            out.append(indent + self.orelse_header)
            render_block(self.orelse, indent + "    ", out)


def render_block(stmts: list[Stmt], indent: str, out: list[str]) -> None:
    if not stmts:
        out.append(indent + "pass")
    for s in stmts:
        s.render(indent, out)


@dataclasses.dataclass
class Program:
    seed: int
    index: int
    prelude: list[tuple[str, str]]      # (name, module-level source block)
    body: list[Stmt]
    ret: str
    steps: list[tuple]                  # ("call", spec dict) | ("exec", source)
    features: set[str]
    globals_declared: set[str] = dataclasses.field(default_factory=set)
    params: tuple = ("x", "y", "n", "xs", "ts")

    def source(self) -> str:
        out = [block for _, block in self.prelude]
        lines = [f"def f({', '.join(self.params)}):"]
        if self.globals_declared:
            lines.append("    global " + ", ".join(sorted(self.globals_declared)))
        render_block(self.body, "    ", lines)
        lines.append(f"    return {self.ret}")
        out.append("\n".join(lines))
        return "\n\n".join(out) + "\n"


# Strings for sets whose order the program reads (their hashes are this process's).
WORDS = ["gallahad", "lancelot", "robin", "arthur", "bedevere", "patsy", "tim", "roger", "zoot", "dingo"]

PRELUDE = [
    ("imports", "import torch\nimport dataclasses\nimport operator\nimport sys"),
    ("globals", "G_SCALE = 2\nG_W = 0.5\nG_LIST = [1, 2]\nG_DICT = {'a': 1, 'b': 2}"),
    ("helpers", '''def helper_add(a, b=1, *, scale=1):
    return a * scale + b

def helper_tensor(t, k=2):
    return t.relu() * k

def helper_pair(t, s=1.0):
    return t + s, t - s

def helper_var(*args, **kwargs):
    return len(args) + len(kwargs)

def helper_append(lst, v=0):
    lst.append(v)
    return len(lst)

def helper_print(t, k=2):
    u = t * k
    print('helper', u.shape)
    return u + 1

def helper_log(lst, t):
    lst.append(len(lst))
    u = t.sin()
    print('log', len(lst), u.shape)
    if u.sum() > 0:
        return u * 2
    return u - 1

def mark_static(t, guard=True):
    t._static = 'guarded' if guard else 'unguarded'   # what torch._dynamo.mark_static_address does'''),
    ("Obj", '''class Obj:
    K = 3

    def __init__(self):
        self.k = 2
        self.w = 1.5
        self.flag = True
        self.items = [1, 2]
        self.act = torch.relu

    def scale(self, t):
        return t * self.k

    def bump(self, by=1):
        self.k = self.k + by
        return self.k

    def apply(self, t):
        return self.act(t)

    @property
    def double_k(self):
        return self.k * 2

OBJ = Obj()'''),
    ("Mod", '''class Mod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(1.5))
        self.register_buffer("shift", torch.tensor(0.25))
        self.act = torch.nn.ReLU()
        self.count = 0
        self.enabled = True

    def forward(self, t):
        out = self.act(t) * self.scale + self.shift
        if self.enabled:
            out = out + 1
        return out

MOD = Mod()'''),
    ("Pt", '''@dataclasses.dataclass
class Pt:
    a: int
    b: int'''),
]

# Added to the prelude of programs that use the ``iter_functional`` feature.
ITER_PRELUDE = ("iter_helpers", '''import itertools
import functools

def gen_accumulate(start):
    total = start
    while True:
        sent = yield total
        if sent is None:
            return total * 2
        total = total + sent

def gen_relay(start):
    result = yield from gen_accumulate(start)
    yield result + 1

def gen_count(k):
    for i in range(k):
        yield i * 2

def gen_tensors(t, k=2):
    for i in range(k):
        yield t * (i + 1)

def gen_from(lst, extra=0):
    yield from lst
    yield len(lst) + extra

def gen_pairs(lst):
    prev = None
    for v in lst:
        if prev is not None:
            yield prev, v
        prev = v

def gen_until(lst, stop=2):
    for v in lst:
        if v > stop:
            return
        yield v

def gen_print(lst):
    for v in lst:
        print('gen', v)
        yield v + 1

def gen_nested(t, lst):
    yield t
    yield from gen_tensors(t, len(lst) % 3)
    yield -t

def scaled(t, k, *, bias=0.0):
    return t * k + bias''')


# Added to the prelude of programs that use the ``user_ctx`` feature.
CTX_PRELUDE = ("ctx_helpers", '''import contextlib
import threading

CTX_LOG = []
LOCK = threading.Lock()

class Tracked:
    swallow_all = False

    def __init__(self, tag, swallow=False):
        self.tag = tag
        self.swallow = swallow
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        CTX_LOG.append(self.tag)
        return self.depth + self.tag

    def __exit__(self, kind, value, tb):
        self.depth -= 1
        CTX_LOG.append(-self.tag if kind is None else 100 + self.tag)
        return self.swallow or Tracked.swallow_all

    def exit_quietly(self, kind, value, tb):
        self.depth -= 1
        return False

class Noisy(Tracked):
    def __enter__(self):
        print('enter', self.tag)
        return super().__enter__()

class SeesTraceback(Tracked):
    def __exit__(self, kind, value, tb):
        CTX_LOG.append(int(tb is None))
        if tb is not None and self.tag > 3:
            CTX_LOG.append(int(tb.tb_lineno > 0))
        return super().__exit__(kind, value, tb)

TRACKED = Tracked(7)

@contextlib.contextmanager
def scope(k):
    CTX_LOG.append(k)
    try:
        yield k + 1
    except (KeyError, IndexError):
        CTX_LOG.append(-1)
    finally:
        CTX_LOG.append(-k)''')


# Added to the prelude of programs that use the ``module_tree`` feature.
NET_PRELUDE = ("module_tree", '''class Affine(torch.nn.Module):
    def __init__(self, w=1.5, b=0.25):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.tensor(w))
        self.bias = torch.nn.Parameter(torch.tensor(b))
        self.k = 1

    def forward(self, t):
        out = t * self.weight * self.k
        if self.bias is not None:
            out = out + self.bias
        return out

class Tripled(Affine):
    def forward(self, t):
        return t * self.weight * 3

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Affine(), torch.nn.Tanh(), Affine(0.5, -0.1)])
        self.named = torch.nn.ModuleDict({"a": Affine(2.0, 0.0), "b": torch.nn.Sigmoid()})
        self.seq = torch.nn.Sequential(Affine(-1.0, 0.5), torch.nn.ReLU())
        self.extra = torch.nn.ParameterList([torch.nn.Parameter(torch.tensor(0.5))])
        self.register_buffer("offset", torch.tensor(0.1))
        self.pick = "a"

    def forward(self, t):
        for block in self.blocks:
            t = block(t)
        t = self.named[self.pick](t) if self.pick in self.named else t
        t = self.seq(t)
        for p in self.extra:
            t = t + p
        return t + self.offset

NET = Net()
HANDLES = []''')


# Added to the prelude of programs that use the ``buffer_updates`` feature.
CACHE_PRELUDE = ("buffer_updates", '''class Cache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("store", torch.zeros(6, 5))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))
        self.pos = 0
        self.history = None

    def push(self, t):
        row = self.pos % 6
        self.store[row, :t.shape[-1]] = t.reshape(-1, t.shape[-1])[0]
        self.pos += 1
        self.count += 1
        return self.store[row]

CACHE = Cache()''')


# Added to the prelude of programs that use the ``nn_layers`` feature.
LAYERS_PRELUDE = ("nn_layers", '''torch.manual_seed(0)
LAYERS = torch.nn.ModuleDict({
    "lin": torch.nn.Linear(2, 3), "ln": torch.nn.LayerNorm(2), "bn": torch.nn.BatchNorm1d(2),
    "gn": torch.nn.GroupNorm(1, 2), "emb": torch.nn.Embedding(5, 3), "drop": torch.nn.Dropout(0.25),
    "gru": torch.nn.GRU(2, 3, batch_first=True), "conv": torch.nn.Conv1d(1, 2, 2),
})''')


# Added to the prelude of programs that use the ``class_protocols`` feature.
PROTOCOL_PRELUDE = ("class_protocols", '''import collections

class Lazy:
    def __init__(self, fn):
        self.fn = fn

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        value = self.fn(obj)
        setattr(obj, self.fn.__name__, value)
        return value

class Clamped:
    def __get__(self, obj, cls=None):
        return self if obj is None else obj._level

    def __set__(self, obj, value):
        obj._level = max(0, min(value, 9))

class Box:
    level = Clamped()

    def __init__(self):
        self.base = torch.arange(3.0)
        self.level = 2

    @Lazy
    def cached(self):
        return self.base * 2 + self.level

class Slotted:
    __slots__ = ("a", "b")

    def __init__(self):
        self.a = 1

PairBase = collections.namedtuple("PairBase", "p q")

class Pair(PairBase):
    def __new__(cls, p, q=None):
        return super().__new__(cls, p, p * 2 if q is None else q)

BOX = Box()
SLOT = Slotted()''')


# Added to the prelude of programs that use the ``stdlib_more`` feature.  The logger is made
# directly (not registered with logging's manager): each run of the program has its own.
OWN_PRELUDE = ("own_protocols", '''import types

class Bag:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)

class Doubler:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        for v in self.items:
            yield v * 2

class RawGrad:
    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        self.previous = torch.is_grad_enabled()
        torch._C._set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        torch._C._set_grad_enabled(self.previous)

def make_counter():
    count = 0

    def bump(d):
        nonlocal count
        count += d
        return count
    return bump

BAG = Bag([1, 2, 3])
DOUBLER = Doubler([1, 4])
BUMP = make_counter()
NS = types.SimpleNamespace(step=0, scale=1.5)''')


STDLIB_PRELUDE = ("stdlib_more", '''import collections
import enum
import functools
import logging

class Color(enum.Enum):
    RED = 1
    GREEN = 2
    BLUE = 3

class Memo:
    def __init__(self):
        self.calls = 0

    @functools.cached_property
    def table(self):
        self.calls += 1
        return [self.calls, 2, 3]

MEMO = Memo()
G_OD = collections.OrderedDict(p=1, q=2, r=3)
G_DQ = collections.deque([1, 2], maxlen=3)
LOG_RECORDS = []

class KeepRecords(logging.Handler):
    def emit(self, record):
        LOG_RECORDS.append((record.funcName, record.lineno, record.levelname, record.getMessage()))

FUZZ_LOG = logging.Logger("fuzz.stdlib", logging.INFO)
FUZZ_LOG.addHandler(KeepRecords())''')


# Added to the prelude of programs that use the ``user_raise`` feature.
RAISE_PRELUDE = ("raise_helpers", '''class FuzzError(ValueError):
    """Adds nothing to ValueError."""

class CodedError(Exception):
    def __init__(self, message, code=0):
        super().__init__(message)
        self.code = code

RAISE_LIMIT = [4]

def check_size(t, k):
    if t.shape[0] + k > RAISE_LIMIT[0]:
        raise FuzzError(f"size {tuple(t.shape)} + {k}", k)
    return t * k

def coded_check(k):
    if k > 1:
        raise CodedError("coded", k)
    return k

def returning_gen(t, k):
    yield t
    return t + k''')


# ----------------------------------------------------------------------------- shapes


def broadcast(a: tuple, b: tuple) -> Optional[tuple]:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else "1"
        db = b[-i] if i <= len(b) else "1"
        if da == db or db == "1":
            out.append(da)
        elif da == "1":
            out.append(db)
        else:
            return None
    return tuple(reversed(out))


class Gen:
    def __init__(self, rng: random.Random, features: frozenset):
        self.rng = rng
        self.features = features
        self.used: set[str] = set()
        self.env: dict[str, tuple] = {
            "x": ("T", ("B", "C")), "y": ("T", ("B", "C")), "n": ("int",),
            "xs": ("list_int",), "ts": ("list_T", ("B", "C")),
        }
        self.with_ts = rng.random() < 0.4    # a second caller list: list mutations are then guarded distinct from it
        if not self.with_ts:
            del self.env["ts"]
        self.with_xs = rng.random() < 0.7    # without it, xs is a local list and G_LIST can be mutated

        self.counter = 0
        self.depth = 0
        self.globals_declared: set[str] = set()
        self.in_loop = 0
        self.frozen: set[str] = set()   # lists a loop iterates over (or is bounded by): not mutated

    # -- helpers
    def on(self, feature: str) -> bool:
        return feature in self.features

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def vars_of(self, kind: str) -> list[str]:
        return [v for v, t in self.env.items() if t[0] == kind]

    def tensors(self, pred=None) -> list[str]:
        return [v for v, t in self.env.items() if t[0] == "T" and (pred is None or pred(t[1]))]

    def pick(self, seq):
        return self.rng.choice(list(seq))

    def shape(self, v):
        return self.env[v][1]

    # -- expressions
    def int_expr(self, depth: int = 0) -> str:
        r = self.rng
        options = [lambda: str(r.randint(0, 4)), lambda: "n"]
        ints = self.vars_of("int")
        if ints:
            options += [lambda: self.pick(ints)] * 2
        options.append(lambda: f"len({self.pick(self.vars_of('list_int') + self.vars_of('list_T'))})")
        tens = self.tensors(lambda s: len(s) >= 1)
        if tens:
            options.append(lambda: f"{self.pick(tens)}.shape[0]")
            options.append(lambda: f"{self.pick(tens)}.dim()")
            options.append(lambda: f"{self.pick(tens)}.size(-1)")
            options.append(lambda: f"{self.pick(tens)}.numel() % 5")
        if self.on("global_stores") or self.on("int_arith"):
            options.append(lambda: "G_SCALE")
            if r.random() < 0.2:
                options.append(lambda: "len(G_LIST)")
        if self.on("object_methods"):
            options.append(lambda: "OBJ.k")
            options.append(lambda: "OBJ.double_k")
        if self.on("module_calls"):
            options.append(lambda: "MOD.count")
        if self.on("helper_calls"):
            options.append(lambda: f"helper_add({self.int_expr(depth + 1)}, b={r.randint(0, 3)})")
            options.append(lambda: f"helper_var({self.int_expr(depth + 1)}, 1, z=2)")
        if self.on("class_attr"):
            self_opts = ["type(OBJ).K", "Obj.K", "OBJ.K"]
            options.append(lambda: self.pick(self_opts))
        if self.on("dict_ops"):
            dicts = self.vars_of("dict_int")
            if dicts:
                options.append(lambda: f"{self.pick(dicts)}.get('a', {r.randint(0, 3)})")
                options.append(lambda: f"len({self.pick(dicts)})")
        if self.on("min_max_sorted"):
            lists = self.vars_of("list_int")
            options.append(lambda: f"max({self.pick(lists)} + [{r.randint(0, 3)}])")
            options.append(lambda: f"sum({self.pick(lists)})")
        if self.on("minmax_key"):
            lists = self.vars_of("list_int")
            options.append(lambda: f"max({self.pick(lists)} + [0], key=lambda v: -v)")
            options.append(lambda: f"min({self.pick(lists)} + [1], key=lambda v: v % 3)")
        if self.on("data_dependent") and r.random() < 0.1:
            tens2 = self.tensors()
            options.append(lambda: f"int({self.pick(tens2)}.sum().item() > 0)")
        if self.on("dataclass") and r.random() < 0.1:
            options.append(lambda: f"Pt({self.int_expr(depth + 1)}, 2).a")
        if depth < 2:
            options += [
                lambda: f"({self.int_expr(depth + 1)} + {self.int_expr(depth + 1)})",
                lambda: f"({self.int_expr(depth + 1)} - {self.int_expr(depth + 1)})",
                lambda: f"({self.int_expr(depth + 1)} * {self.int_expr(depth + 1)}) % 7",
                lambda: f"({self.int_expr(depth + 1)} // 2)",
                lambda: f"abs({self.int_expr(depth + 1)})",
                lambda: f"min({self.int_expr(depth + 1)}, {self.int_expr(depth + 1)})",
                lambda: f"max({self.int_expr(depth + 1)}, {r.randint(0, 3)})",
            ]
        return r.choice(options)()

    def float_expr(self) -> str:
        r = self.rng
        options = [lambda: r.choice(["0.5", "1.5", "-2.0", "0.25"]),
                   lambda: f"{self.int_expr(1)} * 0.5", lambda: "G_W"]
        floats = self.vars_of("float")
        if floats:
            options.append(lambda: self.pick(floats))
            options.append(lambda: f"{self.pick(floats)} / 2")
        if self.on("object_methods"):
            options.append(lambda: "OBJ.w")
        return r.choice(options)()

    def bool_expr(self) -> str:
        r = self.rng
        cmp = lambda: r.choice(["<", "<=", "==", "!=", ">", ">="])  # noqa: E731
        options = [
            lambda: f"{self.int_expr(1)} {cmp()} {self.int_expr(1)}",
            lambda: f"n {cmp()} {r.randint(0, 4)}",
            lambda: f"len(xs) {cmp()} {r.randint(0, 3)}",
            lambda: f"{self.pick(self.tensors(lambda s: len(s) >= 1))}.shape[0] {cmp()} {r.randint(1, 4)}",
            lambda: f"{self.pick(self.tensors())}.dim() == {r.randint(0, 2)}",
            lambda: f"{self.pick(self.tensors())}.dtype == torch.float64",
            lambda: f"{self.int_expr(1)} in {self.pick(self.vars_of('list_int'))}",
            lambda: f"isinstance({self.pick(self.env)}, {r.choice(['int', 'list', 'torch.Tensor', 'float'])})",
            lambda: f"not {self.pick(self.vars_of('list_int'))}",
        ]
        bools = self.vars_of("bool")
        if bools:
            options.append(lambda: self.pick(bools))
            options.append(lambda: f"not {self.pick(bools)}")
        if self.on("object_methods"):
            options.append(lambda: "OBJ.flag")
        if self.on("module_calls"):
            options.append(lambda: "MOD.enabled")
            options.append(lambda: "MOD.training")
        if self.on("dict_ops") and self.vars_of("dict_int"):
            options.append(lambda: f"'{r.choice('abc')}' in {self.pick(self.vars_of('dict_int'))}")
        if self.on("global_stores"):
            options.append(lambda: f"'{r.choice('abc')}' in G_DICT")
        if self.on("is_compare"):
            lists = self.vars_of("list_int")
            options.append(lambda: f"{self.pick(lists)} is {self.pick(lists + ['G_LIST'])}")
            options.append(lambda: f"{self.pick(self.tensors())} is {self.pick(self.tensors())}")
            options.append(lambda: f"{self.pick(self.env)} is None")
        if self.on("data_dependent") and r.random() < 0.1:
            options.append(lambda: f"bool({self.pick(self.tensors())}.sum() > 0)")
            options.append(lambda: f"{self.pick(self.tensors())}.max() > 0.5")
        if self.on("dataclass") and r.random() < 0.1:
            options.append(lambda: f"Pt(n, 1) == Pt({self.int_expr(1)}, 1)")
        return r.choice(options)()

    def tensor_expr(self) -> tuple[str, tuple]:
        """A tensor expression and its symbolic shape."""
        r = self.rng
        t = self.pick(self.tensors())
        s = self.shape(t)
        kind = r.random()
        div = "{}" if self.on("zero_divisors") else "(({}).abs() + 1)"   # a divisor that may be 0
        if kind < 0.3:
            op = r.choice(["{t}.relu()", "torch.sigmoid({t})", "{t}.abs()", "-{t}", "{t} * 2",
                           "{t} + 1.5", "torch.tanh({t})", "{t}.clamp(min=-0.5)",
                           "torch.where({t} > 0, {t}, {t} * 0.1)", "{t}.clone()", "{t} ** 2",
                           "({t} > 0).float()", "{t}.double()", "{t}.float()", "{t} * {i}",
                           "{t} - {f}", "{t}.sin()", "{t}.exp().clamp(max=10)",
                           # lowerings that read an argument or a special value otherwise
                           "torch.nn.functional.gelu({t})", "torch.nn.functional.elu({t})",
                           "torch.nn.functional.hardtanh({t})", "{t} * ({t} > 0)",
                           "torch.logit({t}, eps=0.2)", "{t} * {t}.amax()",
                           "{t} / ({t}.norm(p=float('inf')) + 1)",
                           # where a -0.0 shows: eager's kernels compare and keep x
                           "{t} % 1.5", "torch.sign({t})", "torch.nn.functional.softshrink({t})",
                           "torch.nn.functional.relu6({t})", "{t}.clamp(-0.5, 0.5)", "{t} + 0",
                           # integer tensors: eager refuses some integer ops XLA computes
                           f"{INT.format(v='{t} * 3', to='long')} // 2",
                           f"{INT.format(v='{t} * 3', to='long')} % " + div.format("{i}"),
                           f"{INT.format(v='{t} * 4', to='int')} ** 2"]
                          + ([f"{INT.format(v='{t} * 3', to='int')}.cumsum(-1)"] if len(s) >= 1 else []))
            return op.format(t=t, i=self.int_expr(1), f=self.float_expr()), s
        if kind < 0.6:
            partners = self.tensors(lambda s2: broadcast(s, s2) is not None)
            u = self.pick(partners)
            op = r.choice(["{a} + {b}", "{a} - {b}", "{a} * {b}", "torch.maximum({a}, {b})",
                           "{a} / ({b}.abs() + 1)", "torch.where({b} > 0, {a}, {b})",
                           f"{INT.format(v='{a} * 4', to='long')} // " + div.format(INT.format(v='{b} * 2', to='long')),
                           f"torch.fmod({INT.format(v='{a} * 4', to='long')}, "
                           + div.format(INT.format(v='{b} * 2', to='long')) + ")"])
            return op.format(a=t, b=u), broadcast(s, self.shape(u))
        if kind < 0.68 and self.on("helper_calls"):
            return r.choice([f"helper_tensor({t})", f"helper_tensor({t}, k={r.randint(0, 3)})",
                             f"helper_tensor(t={t}, k=n)"]), s
        if kind < 0.72 and self.on("object_methods"):
            return r.choice([f"OBJ.scale({t})", f"OBJ.apply({t})"]), s
        if kind < 0.76 and self.on("module_calls"):
            return r.choice([f"MOD({t})", f"MOD.act({t})", f"{t} * MOD.scale", f"{t} + MOD.shift"]), s
        if kind < 0.78 and self.on("library_state"):
            return f"OBJ.act({t})", s
        # shape-changing
        options = []
        if len(s) >= 1:
            d = r.randrange(len(s))
            options.append((f"{t}.sum(dim={d})", s[:d] + s[d + 1:]))
            options.append((f"{t}.mean(dim={d}, keepdim=True)", s[:d] + ("1",) + s[d + 1:]))
            options.append((f"{t}.sum()", ()))
            options.append((r.choice([f"{t}.amax()", f"{t}.amin()", f"{t}.var()", f"{t}.sum(dim=[])",
                                      f"{t}.std(dim=())", f"{t}.norm(p=float('inf'))"]), ()))
            options.append((r.choice([f"{t}.amax(dim={d})", f"{t}.logsumexp(dim={d})",
                                      f"{t}.std(dim={d})", f"{t}.max(dim={d}).values",
                                      f"{t}.min({d})[0]"]), s[:d] + s[d + 1:]))
            options.append((f"{t}.cumprod(dim={d})", s))
            options.append((f"{t}.unsqueeze(0)", ("1",) + s))
            options.append((f"{t}.reshape(-1)", ("*".join(s),)))
            options.append((f"torch.cat([{t}, {t}], dim={d})",
                            s[:d] + (f"2{s[d]}",) + s[d + 1:]))
            options.append((f"torch.stack([{t}, {t} + 1])", ("2",) + s))
            if self.on("slicing"):
                options.append((f"{t}[0]", s[1:]))
                options.append((f"{t}[1:]", (f"{s[0]}-1",) + s[1:]))
                options.append((f"{t}[::2]", (f"{s[0]}/2",) + s[1:]))
                options.append((f"{t}[..., :1]", s[:-1] + ("1",)))
        if len(s) == 2:
            options.append((f"{t}.t()", (s[1], s[0])))
            options.append((f"{t}.transpose(0, 1).contiguous()", (s[1], s[0])))
            options.append((f"{t}.view(-1)", (f"{s[0]}*{s[1]}",)))
            mm = self.tensors(lambda s2: len(s2) == 2 and s2[1] == s[1])
            if mm:
                u = self.pick(mm)
                options.append((f"{t} @ {u}.t()", (s[0], self.shape(u)[0])))
            if self.on("slicing"):
                options.append((f"{t}[:, 1:]", (s[0], f"{s[1]}-1")))
                options.append((f"{t}[:, 0]", (s[0],)))
        if not options:
            return f"{t} + 1", s
        return r.choice(options)

    # -- statements
    def gen_block(self, n: int) -> list[Stmt]:
        out = []
        for _ in range(n):
            s = self.gen_stmt()
            if s is not None:
                out.append(s)
        return out

    def scoped_block(self, n: int, setup=None) -> list[Stmt]:
        """A nested block: names first bound inside it are forgotten afterwards (it may run 0
        times); names rebound inside keep their kind (rebinding to another kind is refused)."""
        saved = dict(self.env)
        self.depth += 1
        if setup:
            setup()
        body = self.gen_block(n)
        self.depth -= 1
        self.env = {k: v for k, v in saved.items() if self.env.get(k) == v}
        return body

    def gen_stmt(self) -> Optional[Stmt]:
        kinds = [(name, FEATURES[name][0]) for name in STMT_KINDS if self.on(name)]
        if self.depth >= 2:
            kinds = [(k, w) for k, w in kinds if k not in COMPOUND]
        names, weights = zip(*kinds)
        for _ in range(10):
            kind = self.rng.choices(names, weights)[0]
            saved = dict(self.env)
            try:
                s = getattr(self, "s_" + kind)()
            except IndexError:      # nothing of the needed kind in scope: draw again
                self.env = saved
                continue
            if s is not None:
                self.used.add(kind)
                return s
        return None

    def assign(self, name: Optional[str], kind: tuple, expr: str, prefix: str) -> Stmt:
        """Bind a new variable, or rebind an old one of the same kind (in nested blocks)."""
        if name is None:
            same = [v for v, t in self.env.items() if t == kind and v not in ARGS and v not in self.frozen]
            if same and self.rng.random() < 0.3:
                name = self.pick(same)
            else:
                name = self.fresh(prefix)
        self.env[name] = kind
        return Stmt([f"{name} = {expr}"])

    def s_tensor_ops(self):
        expr, shape = self.tensor_expr()
        if len(shape) > 3:
            return None
        return self.assign(None, ("T", shape), expr, "t")

    def s_int_arith(self):
        r = self.rng
        c = r.random()
        if c < 0.6:
            return self.assign(None, ("int",), self.int_expr(), "i")
        if c < 0.8:
            return self.assign(None, ("float",), self.float_expr(), "f")
        ints = [v for v in self.vars_of("int") if v not in ARGS and v not in self.frozen]
        if ints:
            v = self.pick(ints)
            return Stmt([f"{v} {r.choice(['+=', '-=', '*='])} {r.randint(1, 3)}"])
        return self.assign(None, ("bool",), self.bool_expr(), "b")

    def s_if_python(self):
        cond = self.bool_expr()
        r = self.rng
        body = self.scoped_block(r.randint(1, 3))
        orelse = self.scoped_block(r.randint(1, 2)) if r.random() < 0.5 else None
        if orelse is not None and r.random() < 0.3:
            s = Stmt([f"if {cond}:"], body, orelse, orelse_header=f"elif {self.bool_expr()}:")
            return s
        return Stmt([f"if {cond}:"], body, orelse)

    def s_for_range(self):
        r = self.rng
        i = self.fresh("k")
        self.frozen = set(self.frozen)
        bound = r.choice([str(r.randint(0, 3)), "n", "len(xs)", f"{self.pick(self.tensors(lambda s: len(s) >= 1))}.shape[0]",
                          f"min(n, 3)"])
        if r.random() < 0.3:
            header = f"for {i} in range(1, {bound}):"
        else:
            header = f"for {i} in range({bound}):"
        self.in_loop += 1
        body = self.scoped_block(r.randint(1, 3), lambda: self.env.__setitem__(i, ("int",)))
        self.in_loop -= 1
        return Stmt([header], body)

    def s_for_list(self):
        r = self.rng
        v = self.fresh("v")
        c = r.random()
        lists = self.vars_of("list_int")
        tlists = self.vars_of("list_T")
        if c < 0.3:
            lst = self.pick(lists)
            header, bind = f"for {v} in {lst}:", {v: ("int",)}
        elif c < 0.5:
            j = self.fresh("j")
            lst = self.pick(lists)
            header, bind = f"for {j}, {v} in enumerate({lst}):", {v: ("int",), j: ("int",)}
        elif c < 0.65 and tlists:
            tl = self.pick(tlists)
            header, bind = f"for {v} in {tl}:", {v: ("T", self.env[tl][1])}
        elif c < 0.8:
            a, b = self.pick(lists), self.pick(lists + ["G_LIST"])
            w = self.fresh("w")
            header, bind = f"for {v}, {w} in zip({a}, {b}):", {v: ("int",), w: ("int",)}
        else:
            dicts = self.vars_of("dict_int") + (["G_DICT"] if self.on("global_stores") else [])
            if not dicts:
                return None
            kk = self.fresh("key")
            header, bind = f"for {kk}, {v} in {self.pick(dicts)}.items():", {v: ("int",), kk: ("str",)}
        frozen = set(self.frozen)
        self.frozen |= {w for w in self.env if w in header} | {"G_LIST", "G_DICT", "OBJ", "xs", "ts"}
        self.in_loop += 1
        body = self.scoped_block(r.randint(1, 3), lambda: self.env.update(bind))
        self.in_loop -= 1
        self.frozen = frozen
        return Stmt([header], body)

    def s_while_loop(self):
        r = self.rng
        c = self.fresh("c")
        self.env[c] = ("int",)   # bound before the loop: stays
        limit = r.choice(["3", "n", "min(n, 4)", "len(xs) + 1"])
        frozen = set(self.frozen)
        self.frozen |= {"xs", c}
        self.in_loop += 1
        body = self.scoped_block(r.randint(1, 2))
        self.in_loop -= 1
        self.frozen = frozen
        body.append(Stmt([f"{c} += 1"]))
        return Stmt([f"{c} = 0", f"while {c} < {limit}:"], body)

    def s_list_build(self):
        r = self.rng
        c = r.random()
        if c < 0.35:
            items = ", ".join(self.int_expr(1) for _ in range(r.randint(0, 3)))
            return self.assign(None, ("list_int",), f"[{items}]", "l")
        if c < 0.55:
            return self.assign(None, ("list_int",), f"list(range({r.randint(0, 4)}))", "l")
        if c < 0.7:
            return self.assign(None, ("list_int",), f"{self.pick(self.vars_of('list_int'))}[:]", "l")
        s = ("B", "C")
        ts_ = self.tensors(lambda s2: s2 == s)
        items = ", ".join(self.pick(ts_) for _ in range(r.randint(1, 3)))
        return self.assign(None, ("list_T", s), f"[{items}]", "tl")

    def s_list_mutation(self):
        r = self.rng
        lists = [v for v in self.vars_of("list_int") if v not in ARGS and v not in self.frozen]
        if not lists:
            return None
        lst = self.pick(lists)
        return Stmt([self._list_mut(lst)])

    def _list_mut(self, lst: str) -> str:
        r = self.rng
        text = r.choice([
            f"{lst}.append({self.int_expr(1)})",
            f"{lst}.extend([{self.int_expr(1)}, {r.randint(0, 3)}])",
            f"{lst}.insert(0, {self.int_expr(1)})",
            f"{lst}.pop() if {lst} else None",
            f"{lst}.pop(0) if {lst} else None",
            f"if {lst}: {lst}[0] = {self.int_expr(1)}",
            f"if {lst}: {lst}[-1] += 1",
            f"if {lst}: del {lst}[0]",
            f"{lst}.sort()",
            f"{lst}.reverse()",
            f"{lst}[1:] = [{self.int_expr(1)}]",
            f"{lst} += [{self.int_expr(1)}]",
            f"{lst} = {lst} * 2" if not self.in_loop else f"{lst}.append(1)",
        ])
        if self.in_loop and lst in ARGS and " * 2" in text:
            text = f"{lst}.append(1)"
        return text

    def s_arg_list_mutation(self):
        r = self.rng
        if "xs" in self.frozen or "ts" in self.frozen:
            return None
        c = r.random()
        if c < 0.7:
            m = self._list_mut("xs")
            if "+=" in m or "= xs *" in m:
                m = "xs.append(n)"
            return Stmt([m])
        if c < 0.85 and self.with_ts:
            return Stmt([r.choice(["ts.append(x * 2)", "ts.pop() if ts else None",
                                   "if ts: ts[0] = y"])])
        return Stmt([f"helper_append(xs, {self.int_expr(1)})"]) if self.on("helper_calls") else None

    def s_arg_list_iadd(self):
        r = self.rng
        if "xs" in self.frozen or "ts" in self.frozen:
            return None
        text = r.choice([f"xs += [{self.int_expr(1)}]", "xs *= 2", "ts += [x]" if self.with_ts else "xs += [1]",
                         f"xs += {self.pick(self.vars_of('list_int'))}"])
        if self.in_loop and ("*=" in text or not text.endswith("]")):
            text = "xs += [1]"       # doubling in a loop grows exponentially over reused calls
        return Stmt([text])

    def s_dict_ops(self):
        r = self.rng
        dicts = self.vars_of("dict_int")
        if not dicts or r.random() < 0.35:
            c = r.random()
            if c < 0.6:
                items = ", ".join(f"'{k}': {self.int_expr(1)}" for k in r.sample("abc", r.randint(0, 3)))
                return self.assign(None, ("dict_int",), "{" + items + "}", "d")
            return self.assign(None, ("dict_int",), "dict(G_DICT)", "d")
        d = self.pick(dicts)
        k = r.choice("abc")
        return Stmt([r.choice([
            f"{d}['{k}'] = {self.int_expr(1)}",
            f"{d}.pop('{k}', None)",
            f"if '{k}' in {d}: del {d}['{k}']",
            f"{d}.update({{'{k}': {self.int_expr(1)}}})",
            f"{d}.setdefault('{k}', {r.randint(0, 3)})",
            f"{d}['{k}'] = {d}.get('{k}', 0) + 1",
        ])])

    def s_dict_views(self):
        r = self.rng
        dicts = self.vars_of("dict_int") or ["G_DICT"]
        d = self.pick(dicts)
        name = self.fresh("dv")
        self.env[name] = ("view",)
        return Stmt([f"{name} = {d}.{r.choice(['keys', 'values', 'items'])}()"])

    def s_unpacking(self):
        r = self.rng
        c = r.random()
        if c < 0.3:
            t = self.pick(self.tensors())
            a, b = self.fresh("t"), self.fresh("t")
            self.env[a] = self.env[b] = ("T", self.shape(t))
            call = f"helper_pair({t})" if self.on("helper_calls") else f"({t} + 1, {t} - 1)"
            return Stmt([f"{a}, {b} = {call}"])
        if c < 0.5:
            ints = [v for v in self.vars_of("int") if v not in ARGS and v not in self.frozen]
            if len(ints) >= 2:
                a, b = r.sample(ints, 2)
                return Stmt([f"{a}, {b} = {b}, {a}"])
            return None
        if c < 0.75:
            rhs = f"[{self.int_expr(1)}, *{self.pick(self.vars_of('list_int'))}]"
            a, rest = self.fresh("i"), self.fresh("l")
            self.env[a] = ("int",)
            self.env[rest] = ("list_int",)
            return Stmt([f"{a}, *{rest} = {rhs}"])
        rhs = f"({self.int_expr(1)}, {self.int_expr(1)})"
        a, b = self.fresh("i"), self.fresh("i")
        self.env[a] = self.env[b] = ("int",)
        return Stmt([f"({a}, {b}) = {rhs}"])

    def s_comprehension(self):
        r = self.rng
        c = r.random()
        lst = self.pick(self.vars_of("list_int"))
        if c < 0.3:
            return self.assign(None, ("list_int",), f"[v * 2 for v in {lst} if v {r.choice(['>', '<', '!='])} {r.randint(0, 3)}]", "l")
        if c < 0.45:
            return self.assign(None, ("dict_int",), f"{{k: v for k, v in zip('abc', {lst})}}", "d")
        if c < 0.6:
            return self.assign(None, ("int",), f"sum(v for v in {lst} if v % 2 == 0)", "i")
        if c < 0.7:
            return self.assign(None, ("bool",), f"{r.choice(['any', 'all'])}(v > {r.randint(0, 3)} for v in {lst})", "b")
        t = self.pick(self.tensors(lambda s: s == ("B", "C")))
        if c < 0.85:
            return self.assign(None, ("list_T", ("B", "C")), f"[{t} * k for k in range({r.randint(1, 3)})]", "tl")
        tl = self.pick(self.vars_of("list_T"))
        s = self.env[tl][1]
        return self.assign(None, ("T", s), f"sum([u.relu() for u in {tl}], torch.zeros_like({t}))"
                           if s == ("B", "C") else f"{t} + 0", "t")

    def s_helper_calls(self):
        r = self.rng
        c = r.random()
        if c < 0.4:
            return self.assign(None, ("int",), r.choice([
                f"helper_add({self.int_expr(1)})", f"helper_add({self.int_expr(1)}, {self.int_expr(1)}, scale=2)",
                f"helper_add(b=2, a={self.int_expr(1)})", f"helper_var(*{self.pick(self.vars_of('list_int'))})",
                f"helper_var(**{{'a': 1}}, b=n)"]), "i")
        if c < 0.6 and self.vars_of("float"):
            return self.assign(None, ("float",), f"helper_add({self.pick(self.vars_of('float'))}, b=0.5)", "f")
        t = self.pick(self.tensors())
        return self.assign(None, ("T", self.shape(t)), r.choice([
            f"helper_tensor({t})", f"helper_add({t}, b={self.float_expr()}, scale=n)",
            f"helper_add({t}, {self.pick(self.tensors(lambda s: broadcast(s, self.shape(t)) == self.shape(t)))})"]), "t")

    def s_object_methods(self):
        r = self.rng
        c = r.random()
        if c < 0.3:
            return self.assign(None, ("int",), r.choice(["OBJ.bump()", "OBJ.bump(by=n)", "OBJ.double_k",
                                                          "len(OBJ.items)"]), "i")
        if c < 0.5:
            return Stmt([r.choice([f"OBJ.items.append({self.int_expr(1)})", "OBJ.bump(2)",
                                   "OBJ.items.pop() if OBJ.items else None"])])
        t = self.pick(self.tensors())
        return self.assign(None, ("T", self.shape(t)), r.choice([f"OBJ.scale({t})", f"OBJ.apply({t})",
                                                                  f"{t} * OBJ.w"]), "t")

    def s_object_stores(self):
        r = self.rng
        t = self.pick(self.tensors())
        if r.random() < 0.3:       # something the frame made, kept on the caller's object past it
            return Stmt(r.choice([["OBJ.made = Obj()"], ["made = Obj()", f"made.last = {t}", "OBJ.made = made"],
                                  ["OBJ.fn = lambda u: u * OBJ.k"], [f"OBJ.pair = (OBJ.k, {t})"],
                                  ["made = Obj()", "OBJ.made = made", "OBJ.made_scale = made.scale"]]))
        return Stmt([r.choice([f"OBJ.k = {self.int_expr(1)}", f"OBJ.w = {self.float_expr()}",
                               "OBJ.flag = not OBJ.flag", f"OBJ.items = [{self.int_expr(1)}]",
                               f"OBJ.k += 1", f"OBJ.extra = {self.int_expr(1)}",
                               f"OBJ.last = {t}"])])

    def s_module_calls(self):
        r = self.rng
        t = self.pick(self.tensors())
        return self.assign(None, ("T", self.shape(t)), r.choice([
            f"MOD({t})", f"MOD.act({t})", f"{t} * MOD.scale + MOD.shift",
            f"MOD({t}) if MOD.enabled else {t}"]), "t")

    def s_module_stores(self):
        r = self.rng
        return Stmt([r.choice(["MOD.count += 1", f"MOD.count = {self.int_expr(1)}",
                               "MOD.enabled = not MOD.enabled", f"MOD.note = {self.int_expr(1)}"])])

    def s_module_tree(self):
        r = self.rng
        t = self.pick(self.tensors())
        c = r.random()
        if c < 0.15:
            return self.assign(None, ("int",), r.choice([
                "len(NET.blocks)", "len(NET.named)", "len(NET.seq)", "sum(1 for _ in NET.children())",
                "len(list(NET.named_parameters()))", "len([m for m in NET.modules() if isinstance(m, Affine)])",
                "NET.blocks[0].k if hasattr(NET.blocks[0], 'k') else -1"]), "i")
        if c < 0.25:
            return Stmt([r.choice([f"NET.blocks[0].k = {self.int_expr(1)}", "NET.pick = 'a' if n > 1 else 'b'",
                                   "NET.seq[0].k += 1"])])
        if c < 0.45:
            acc, var = self.fresh("t"), self.fresh("m")
            self.env[acc] = ("T", self.shape(t))
            loop = r.choice([
                (f"for {var} in NET.blocks:", f"    {acc} = {var}({acc})"),
                (f"for _, {var} in NET.named.items():", f"    {acc} = {var}({acc})"),
                (f"for i, {var} in enumerate(NET.seq):", f"    {acc} = {var}({acc}) if i % 2 == 0 else {acc} + 1"),
                (f"for name, {var} in NET.named_parameters():",
                 f"    {acc} = {acc} + {var} if name.endswith('bias') else {acc}"),
                (f"for {var} in reversed(NET.blocks):", f"    {acc} = {var}({acc})")])
            return Stmt([f"{acc} = {t}", *loop])
        return self.assign(None, ("T", self.shape(t)), r.choice([
            f"NET({t})", f"NET.blocks[0]({t})", f"NET.blocks[-1]({t})", f"NET.seq({t})",
            f"NET.named['a']({t}) if 'a' in NET.named else {t}", f"{t} * NET.seq[0].weight",
            f"{t} + sum(p.sum() for p in NET.parameters())", f"{t} * NET.extra[0]",
            f"{t} if NET.training else {t} * 2", f"NET.seq[:1]({t})"]), "t")

    def s_buffer_updates(self):
        r = self.rng
        t = self.pick(self.tensors(lambda s: s == ("B", "C")))
        c = r.random()
        if c < 0.3:
            return Stmt([r.choice([
                f"CACHE.store[CACHE.pos % 6, :{t}.shape[1]] = {t}[0]", "CACHE.store[n % 6] += 1.0",
                "CACHE.pos += 1", "CACHE.count += 1", "CACHE.store.index_copy_(0, torch.tensor([n % 6]), torch.ones(1, 5))",
                f"CACHE.store[:{t}.shape[0], :{t}.shape[1]].mul_(0.5)", "CACHE.store.zero_() if n > 2 else None",
                f"CACHE.history = {t}.sum().reshape(1) if CACHE.history is None else "
                f"torch.cat([CACHE.history[-4:], {t}.sum().reshape(1).to(CACHE.history.dtype)])"])])
        if c < 0.38:
            # transformers' static cache: a write tried, a handler for a missing kernel or a wrong
            # type (float bitwise_not_ has no CPU kernel: eager takes the handler)
            write = r.choice([f"CACHE.store.index_copy_(0, torch.tensor([CACHE.pos % 6]), CACHE.store[:1] + {t}.sum().detach())",
                              f"CACHE.store.index_fill_(1, torch.tensor([n % 5]), {t}.mean().item())",
                              "CACHE.count.bitwise_not_()", "CACHE.store.bitwise_not_()"])
            caught = r.choice(["NotImplementedError", "TypeError", "(NotImplementedError, TypeError)"])
            return Stmt(["try:"], [Stmt([write])], [Stmt(["CACHE.store.mul_(0.5)"])], orelse_header=f"except {caught}:")
        if c < 0.45:
            return self.assign(None, ("T", ("C",)), f"CACHE.push({t})[:{t}.shape[1]]", "t")
        if c < 0.55:
            return self.assign(None, ("int",), r.choice(["CACHE.pos", "CACHE.pos % 6", "int(CACHE.count)"]), "i")
        return self.assign(None, ("T", ("B", "C")), r.choice([
            f"{t} + CACHE.store[:{t}.shape[0], :{t}.shape[1]]", f"{t} * CACHE.count",
            f"{t} + CACHE.store.sum().tanh()", f"torch.where(CACHE.store[:{t}.shape[0], :{t}.shape[1]] > 0, {t}, -{t})",
            f"{t} + (CACHE.history.mean() if CACHE.history is not None else 0.0)",
            f"{t} * CACHE.store[CACHE.pos % 6, :{t}.shape[1]]"]), "t")

    def s_nn_layers(self):
        r = self.rng
        t = self.pick(self.tensors(lambda s: s == ("B", "C")))
        two = f"{t}[:, :2]"
        c = r.random()
        if c < 0.25:
            return self.assign(None, ("T", ("B", "2")), r.choice([
                f"LAYERS['ln']({two})", f"LAYERS['bn']({two})", f"LAYERS['gn']({two})",
                f"LAYERS['drop']({two})", f"LAYERS['ln'](({self.pick(['x', 'y'])}[:, :2] * 100 + 50).detach())"]), "t")
        if c < 0.5:
            return self.assign(None, ("T", ("B", "3")), r.choice([
                f"LAYERS['lin']({two})", f"LAYERS['emb'](({two}.abs() * 2).long().clamp(max=4)).sum(1)",
                f"LAYERS['gru']({two}.unsqueeze(1))[0][:, 0]", f"LAYERS['lin'](LAYERS['ln']({two}))"]), "t")
        if c < 0.6:
            return self.assign(None, ("T", ("B", "2", "1")), f"LAYERS['conv']({two}.unsqueeze(1))", "t")
        if c < 0.7:
            return Stmt([r.choice(["LAYERS['bn'].momentum = 0.5", "LAYERS.train(not LAYERS.training)",
                                   "LAYERS['bn'].num_batches_tracked.zero_()"])])
        return self.assign(None, ("T", ("2",)), r.choice([
            "LAYERS['bn'].running_mean * 1", "LAYERS['bn'].running_var + 0", "LAYERS['ln'].weight * 2",
            f"LAYERS['bn']({two}).abs().mean(0)"]), "t")   # (a plain mean of a norm's output cancels to 0)

    def s_global_stores(self):
        r = self.rng
        c = r.random()
        if c < 0.4:
            self.globals_declared.add("G_SCALE")
            return Stmt([r.choice([f"G_SCALE = {self.int_expr(1)}", "G_SCALE += 1"])])
        if c < 0.5:
            self.globals_declared.add("G_W")
            return Stmt([f"G_W = {self.float_expr()}"])
        if c < 0.8 and "G_LIST" not in self.frozen:
            return Stmt([r.choice([f"G_LIST.append({self.int_expr(1)})", "G_LIST.pop() if G_LIST else None",
                                   f"if G_LIST: G_LIST[0] = {self.int_expr(1)}"])])
        if "G_DICT" in self.frozen:
            return None
        return Stmt([r.choice([f"G_DICT['{r.choice('abc')}'] = {self.int_expr(1)}",
                               f"G_DICT.pop('{r.choice('abc')}', None)"])])

    def s_inplace_local(self):
        locals_ = [v for v in self.tensors() if v not in ARGS]
        if not locals_:
            return None
        return self._inplace(self.pick(locals_))

    def s_inplace_arg(self):
        r = self.rng
        if r.random() < 0.3:
            v = self.fresh("t")
            base = r.choice(["x", "y"])
            src, shape = r.choice([(f"{base}[0]", ("C",)), (f"{base}[:, 1:]", ("B", "C-1")),
                                   (f"{base}.t()", ("C", "B")), (base, ("B", "C"))])
            self.env[v] = ("T", shape)
            return Stmt([f"{v} = {src}", self._inplace(v).lines[0]])
        return self._inplace(r.choice(["x", "y", "ts[0] if ts else x" if self.with_ts else "x"]) if r.random() < 0.9 else "x")

    def _inplace(self, t: str) -> Stmt:
        r = self.rng
        name = t.split(" ")[0] if " " not in t else "x"
        shape = self.shape(name) if name in self.env else ("B", "C")
        partners = self.tensors(lambda s: broadcast(shape, s) == shape)
        u = self.pick(partners) if partners else "1.0"
        if " if " in t:
            t = f"({t})"
        ops = [f"{t}.add_({u})", f"{t}.mul_({self.float_expr()})", f"{t}.relu_()", f"{t}.sub_(1)",
               f"{t}.clamp_(-1, 1)", f"{t}.fill_({self.float_expr()})",
               f"{t}.copy_(torch.tensor(0.5))" if self.on("host_sources") else
               f"{t}.copy_(torch.tensor(0.5, device={t}.device))"]
        if partners:                     # a copy leaves the target holding other data
            ops += [f"{t}.copy_({u})"]
        if " " not in t:
            ops += [f"{t} += {u}", f"{t} *= 2"]
            if len(shape) >= 1:
                ops += [f"{t}[0] = {self.float_expr()}"]
            if len(shape) == 2:
                ops += [f"{t}[:, 0] = 0.0"]
        return Stmt([r.choice(ops)])

    def s_slicing(self):
        r = self.rng
        if r.random() < 0.5:
            lst = self.pick(self.vars_of("list_int"))
            return self.assign(None, ("list_int",), f"{lst}[{r.choice(['1:', ':-1', '::2', '::-1', ':n'])}]", "l")
        return self.s_tensor_ops()

    def s_early_return(self):
        return Stmt([f"if {self.bool_expr()}:"], [Stmt([f"return {self.ret_expr()}"])])

    def s_print(self):
        items = []
        for _ in range(self.rng.randint(1, 3)):
            c = self.rng.random()
            if c < 0.4:
                items.append(self.int_expr(1))
            elif c < 0.6:
                items.append(self.pick(self.vars_of("list_int")))
            elif c < 0.7:
                items.append(f"{self.pick(self.tensors())}.shape")
            else:
                items.append(repr(self.rng.choice(["a", "step", "x"])))
        if self.on("data_dependent") and self.rng.random() < 0.2:
            items.append(self.pick(self.tensors()))
        return Stmt([f"print({', '.join(items)})"])

    def s_is_compare(self):
        return self.assign(None, ("bool",), self.bool_expr() if self.rng.random() < 0.3 else
                           f"{self.pick(self.vars_of('list_int'))} is {self.pick(self.vars_of('list_int') + ['G_LIST'])}", "b")

    def s_min_max_sorted(self):
        r = self.rng
        lst = self.pick(self.vars_of("list_int"))
        return self.assign(None, ("list_int",), r.choice([f"sorted({lst})", f"sorted({lst}, reverse=True)",
                                                          f"list(reversed({lst}))"]), "l") \
            if r.random() < 0.5 else self.assign(None, ("int",), f"{r.choice(['min', 'max'])}({lst} + [n])", "i")

    def s_minmax_key(self):
        r = self.rng
        lst = self.pick(self.vars_of("list_int"))
        if r.random() < 0.5:
            return self.assign(None, ("list_int",), f"sorted({lst}, key=lambda v: (v % 3, -v))", "l")
        return self.assign(None, ("int",), f"{r.choice(['min', 'max'])}({lst} + [n], key=lambda v: -v)", "i")

    def s_lazy_iterators(self):
        r = self.rng
        a = self.pick(self.vars_of("list_int"))
        b = self.pick(self.vars_of("list_int"))
        z = self.fresh("z")
        c = r.random()
        if c < 0.4:
            return Stmt([f"{z} = zip({a}, {b})", f"{a}.append(9)" if a not in ARGS and a not in self.frozen else "pass",
                         f"{self.fresh('l')} = list({z})"])
        if c < 0.7:
            name = self.fresh("l")
            self.env[name] = ("list_int",)
            return Stmt([f"{z} = map(lambda v: v + 1, {a})", f"{name} = list({z})"])
        name = self.fresh("l")
        self.env[name] = ("view",)
        return Stmt([f"{name} = list(zip({a}, {b}, strict=True))"])

    def s_loop_mutation(self):
        lists = [v for v in self.vars_of("list_int") if v not in ARGS] or ["xs"]
        lst = self.pick(lists)
        v = self.fresh("v")
        return Stmt([f"for {v} in {lst}:"],
                    [Stmt([f"if len({lst}) < 6:"], [Stmt([f"{lst}.append({v} + 1)"])])])

    def s_dataclass(self):
        r = self.rng
        p = self.fresh("p")
        self.env[p] = ("obj",)
        return Stmt([f"{p} = Pt({self.int_expr(1)}, {self.int_expr(1)})",
                     f"{self.fresh('b')} = {p} == Pt(1, 2)"])

    def s_library_state(self):
        t = self.pick(self.tensors())
        return self.assign(None, ("T", self.shape(t)), f"OBJ.act({t})", "t")

    def s_class_attr(self):
        return self.assign(None, ("int",), self.rng.choice(["type(OBJ).K", "Obj.K + 1", "OBJ.K * 2"]), "i")

    def s_default_dtype(self):
        t = self.pick(self.tensors())
        return self.assign(None, ("T", self.shape(t)), self.rng.choice(
            [f"{t} + torch.ones({t}.shape)", f"{t} * torch.tensor(2.0)", f"{t} + torch.zeros(1)"]), "t")

    def s_data_dependent(self):
        r = self.rng
        t = self.pick(self.tensors())
        if r.random() < 0.5:
            return self.assign(None, ("float",), f"{t}.sum().item()", "f")
        return Stmt([f"if {t}.sum() > 0:"], self.scoped_block(1))

    # -- graph breaks: each option is one family of break the tracer must split the frame at
    def s_graph_breaks(self):
        r = self.rng
        t = self.pick(self.tensors())
        c = r.random()
        if c < 0.15:      # print of tensors/shapes between two tensor blocks
            before, after = self.s_tensor_ops(), self.s_tensor_ops()
            if before is None or after is None:
                return None
            u = self.pick(self.tensors())
            shown = r.choice([f"{u}.shape", f"{u}.detach().round(decimals=2)", f"{u}.dtype", f"{u}.dim()"])
            return Stmt(before.lines + [f"print('gb', {shown})"] + after.lines)
        if c < 0.27:      # a branch on a tensor value: each side continues in its own resume function
            cond = f"{t}.{r.choice(['sum()', 'max()', 'mean()'])} > {r.choice(['0', '0.5'])}"
            body = self.scoped_block(r.randint(1, 2))
            orelse = self.scoped_block(r.randint(1, 2)) if r.random() < 0.6 else None
            return Stmt([f"if {cond}:"], body, orelse)
        if c < 0.39:      # tensor data read into python arithmetic
            kind, expr = r.choice([
                ("float", f"float({t}.sum()) * 2 + n"), ("float", f"{t}.sum().item() - G_W"),
                ("int", f"int({t}.max().item() > 0) + n"), ("bool", f"bool({t}.sum() > 0) and n > 1"),
                ("int", f"len(xs) if {t}.mean().item() > 0 else n")])
            return self.assign(None, (kind,), expr, {"float": "f", "int": "i", "bool": "b"}[kind])
        if c < 0.45:      # a break with live values on the stack (an input, an intermediate, a partial list)
            u = self.pick(self.tensors(lambda s2: broadcast(self.shape(t), s2) == self.shape(t)))
            return self.assign(None, ("T", self.shape(t)), r.choice([
                f"({t} + 1) * float({u}.sum())", f"{t} * operator.length_hint(iter(xs)) + {u}",
                f"[{t}.sum(), {u} + n, print('mid', n)][1] + {t}", f"torch.where({u} > 0, {t}, {t} * {u}.max().item())"]), "t")
        if c < 0.53:      # a C function the interpreter does not model
            lst = self.pick(self.vars_of("list_int"))
            return self.assign(None, ("int",), r.choice([f"operator.length_hint(iter({lst})) + n",
                                                         f"int(id({lst}) == id({lst})) + len({lst})",
                                                         f"operator.length_hint(iter({lst}), 3)"]), "i")
        if c < 0.6:       # inside a with block (left before the eager instruction, re-entered after)
            cm = r.choice(["torch.no_grad()", "torch.enable_grad()", "torch.set_grad_enabled(n > 1)"])
            saved = dict(self.env)
            a, b = self.s_tensor_ops(), self.s_tensor_ops()
            u = self.pick(self.tensors())
            self.env = {k: v for k, v in saved.items() if self.env.get(k) == v}
            body = [s for s in (a, Stmt([f"print('in with', torch.is_grad_enabled(), {u}.requires_grad)"]), b) if s]
            return Stmt([f"with {cm}:"], body)
        if c < 0.7:       # inside an inlined helper: the break is taken at the call site
            calls = [f"helper_print({t})", f"helper_print({t}, k=n)"]
            if "G_LIST" not in self.frozen:        # side effect, print, tensor branch: all in the callee
                calls.append(f"helper_log(G_LIST, {t})")
            return self.assign(None, ("T", self.shape(t)), r.choice(calls), "t")
        if c < 0.82:      # pending side effects on caller lists/dicts/attributes, then the break
            effects = [e for e in (None if "xs" in self.frozen or not self.with_xs else "xs.append(n)",
                                   None if "G_LIST" in self.frozen else "G_LIST.append(len(G_LIST))",
                                   None if "G_DICT" in self.frozen else "G_DICT['gb'] = n",
                                   "OBJ.k = OBJ.k + 1", "MOD.count += 1", f"OBJ.last = {t} * 2") if e]
            return Stmt(r.sample(effects, r.randint(1, 3)) + [r.choice(["print('effects', len(G_LIST), OBJ.k)",
                                                                         "print(xs, G_DICT, MOD.count)",
                                                                         "operator.length_hint(iter(G_LIST))"])])
        if c < 0.9:       # two breaks in a row
            return Stmt([f"print('one', {t}.shape)", f"print('two', {self.int_expr(1)})"])
        # an eager instruction that raises (on some calls only: the branch is on a python value)
        return Stmt([f"if n {r.choice(['>', '>=', '=='])} {r.randint(1, 3)}:"],
                    [Stmt([f"{self.fresh('i')} = {r.choice(['int', 'float'])}({t})"])])

    def s_graph_raises(self):
        t = self.pick(self.tensors(lambda s: len(s) >= 1))
        return Stmt(["G_LIST.append(n)", f"{self.fresh('t')} = {t}[torch.tensor([7])]"])

    def s_try_except(self):
        r = self.rng
        risky = r.choice([f"{self.fresh('i')} = {self.pick(self.vars_of('list_int'))}[{r.randint(0, 3)}]",
                          f"{self.fresh('i')} = {{'a': 1}}['{r.choice('ab')}']",
                          f"{self.fresh('i')} = 10 // {self.int_expr(1)}",
                          f"{self.fresh('i')} = G_DICT['{r.choice('abc')}']"])
        body = [Stmt([risky])] + self.scoped_block(r.randint(0, 2))
        exc = r.choice(["KeyError", "IndexError", "ZeroDivisionError", "(KeyError, IndexError, ZeroDivisionError)",
                        "LookupError", "Exception"])
        handler = self.scoped_block(r.randint(1, 2))
        header = f"except {exc}:"
        if r.random() < 0.5:          # the exception itself, read in the handler (often at a break)
            e = self.fresh("e")
            header = f"except {exc} as {e}:"
            handler.insert(r.randint(0, len(handler)), Stmt([r.choice([
                f"print('caught', type({e}).__name__, {e}.args)",
                f"print('handling', sys.exc_info()[0].__name__, {e}.__context__ is None)",
                f"print('is it', sys.exc_info()[1] is {e}, isinstance({e}, LookupError))"])]))
        s = Stmt(["try:"], body, handler, orelse_header=header)
        if r.random() < 0.3:
            s = Stmt(["try:"], [s], [Stmt([f"G_LIST.append({r.randint(0, 9)})" if "G_LIST" not in self.frozen else "pass"])],
                     orelse_header="finally:")
        return s

    def s_grad_reads(self):
        r = self.rng
        t = self.pick(self.tensors())
        g, out = self.fresh("g"), self.fresh("t")
        self.env[out] = ("T", self.shape(t))
        body = []
        if r.random() < 0.6:       # a backward pass first (a graph break), accumulating into .grad
            body.append(Stmt([f"MOD({t}).sum().backward()" if r.random() < 0.5 else f"(MOD({t}) * {t}).mean().backward()"]))
        body.append(Stmt([f"{g} = MOD.scale.grad"]))
        body.append(Stmt([r.choice([f"{out} = {t} * ({g} if {g} is not None else 0.0)",
                                    f"{out} = {t} + (0.0 if {g} is None else {g}.item())",
                                    f"{out} = {t} - (1.0 if {g} is None else {g} * 2)"])]))
        if r.random() < 0.3:       # the gradient written in place
            body.append(Stmt([f"if {g} is not None:"], [Stmt([f"{g}.mul_(0.5)"])]))
        if r.random() < 0.3:       # an SGD step on the parameter
            body.append(Stmt([f"if {g} is not None:"], [Stmt(["with torch.no_grad():"], [Stmt([f"MOD.scale.sub_(0.01 * {g})"])])]))
        return Stmt(["if True:"], body)

    def s_grad_mode(self):
        r = self.rng
        cm = r.choice(["torch.no_grad()", "torch.enable_grad()", "torch.set_grad_enabled(n > 1)"] * 3
                      + ["torch.inference_mode()", "torch.inference_mode(n > 1)"])
        return Stmt([f"with {cm}:"], self.scoped_block(r.randint(1, 3)))

    def s_autocast(self):
        r = self.rng
        dtype = r.choice(["torch.bfloat16", "torch.float16"])
        enabled = r.choice(["", "", ", enabled=False", ", enabled=n > 1"])
        square = self.tensors(lambda s: len(s) == 2)
        head = []
        if square:           # an op the region casts (to its dtype), brought back to float32
            t, out = self.pick(square), self.fresh("t")
            head = [Stmt([f"{out} = ({t} @ {t}.t() + 1).float().sum(-1)"])]
            self.env[out] = ("T", (self.shape(t)[0],))
        return Stmt([f"with torch.autocast('cpu', dtype={dtype}{enabled}):"], head + self.scoped_block(r.randint(1, 2)))

    def s_closures(self):
        r = self.rng
        name = self.fresh("fn")
        c = r.random()
        if c < 0.4:
            k = self.int_expr(1)
            t = self.pick(self.tensors())
            out = self.fresh("t")
            lines = [f"{name} = lambda v, k={r.randint(0, 3)}: v * {k} + k"]
            self.env[out] = ("T", self.shape(t))
            return Stmt(lines + [f"{out} = {name}({t})"])
        if c < 0.75:      # a cell written through the closure; later statements read it (after a break, too)
            count = self.fresh("i")
            body = Stmt([f"def {name}(d):"], [Stmt([f"nonlocal {count}", f"{count} += d", f"return {count}"])])
            out = self.fresh("i")
            self.env[count] = ("int",)
            self.env[out] = ("int",)
            return Stmt(["if True:"], [Stmt([f"{count} = {self.int_expr(1)}"]), body,
                                       Stmt([f"{out} = {name}({r.randint(1, 3)}) + {name}(1)"])])
        lst = self.pick(self.vars_of("list_int"))
        inner = Stmt([f"def {name}(v):"], [Stmt([f"return v + len({lst}) + n"])])
        out = self.fresh("i")
        self.env[out] = ("int",)
        return Stmt([], None) if False else Stmt(["if True:"], [inner, Stmt([f"{out} = {name}({self.int_expr(1)})"])])

    def s_user_ctx(self):
        r = self.rng
        entered = self.fresh("i")
        holding = getattr(self, "holding_lock", False)       # LOCK is not reentrant: never inside itself
        manager = r.choice([f"Tracked({r.randint(1, 5)}, swallow={r.random() < 0.4})", "TRACKED",
                            f"scope({r.randint(1, 5)})", f"Noisy({r.randint(1, 5)}, swallow={r.random() < 0.4})",
                            f"SeesTraceback({r.randint(1, 5)}, swallow={r.random() < 0.5})",
                            "contextlib.suppress(KeyError, IndexError)",
                            "torch.autograd.profiler.record_function('block')"] + ([] if holding else ["LOCK"]))
        # record_function's __enter__ returns itself, suppress's None
        binds = not manager.startswith(("torch.", "LOCK", "contextlib."))
        self.holding_lock = holding or manager == "LOCK"
        try:
            body = self.scoped_block(r.randint(1, 3), setup=lambda: self.env.__setitem__(entered, ("int",)) if binds else None)
        finally:
            self.holding_lock = holding
        if r.random() < 0.35:          # an exception the manager may swallow, before or after the rest
            risky = Stmt([r.choice([f"{self.fresh('i')} = {{'a': 1}}['{r.choice('ab')}']",
                                    f"{self.fresh('i')} = {self.pick(self.vars_of('list_int'))}[{r.randint(0, 3)}]"])])
            body = [risky] + body if r.random() < 0.5 else body + [risky]
        return Stmt([f"with {manager} as {entered}:" if binds else f"with {manager}:"], body)

    def s_user_raise(self):
        r = self.rng
        t = self.pick(self.tensors())
        out = self.fresh("t")
        k = self.int_expr(1)
        c = r.random()
        if c < 0.2:        # raised in a helper, the message and arguments read in the handler
            s = Stmt(["try:"], [Stmt([f"{out} = check_size({t}, {k})"])],
                     [Stmt([f"{out} = {t} - len(str(e)) - e.args[1]"])], orelse_header="except ValueError as e:")
        elif c < 0.4:      # raised here, maybe re-raised bare or from another, caught outside
            inner = Stmt(["try:"], [Stmt([f"if {k} {r.choice(['>', '<', '=='])} {r.randint(0, 3)}:"],
                                         [Stmt([f"raise KeyError({k})"])]), Stmt([f"{out} = {t} + 1"])],
                         [Stmt([f"G_LIST.append(e.args[0])" if "G_LIST" not in self.frozen else "pass",
                                r.choice(["raise", "raise FuzzError('again') from e", "raise FuzzError"])])],
                         orelse_header="except KeyError as e:")
            s = Stmt(["try:"], [inner], [Stmt([f"{out} = {t} * (2 if e.__cause__ is None else 3) + len(e.args)"])],
                     orelse_header=f"except {r.choice(['(KeyError, FuzzError)', 'LookupError', 'Exception'])} as e:")
            if "ValueError" not in s.orelse_header and "Exception" not in s.orelse_header:
                s = Stmt(["try:"], [s], [Stmt([f"{out} = {t} - 1"])], orelse_header="except ValueError:")
        elif c < 0.55:     # across a grad-mode block
            s = Stmt(["try:"], [Stmt([f"with {r.choice(['torch.no_grad()', 'torch.enable_grad()'])}:"],
                                     [Stmt([f"{out} = {t} * 2", f"if {k} > {r.randint(0, 3)}:"],
                                           [Stmt(["raise RuntimeError('stop')"])])])],
                     [Stmt([f"{out} = {t} + torch.is_grad_enabled()"])], orelse_header="except RuntimeError:")
        elif c < 0.7:      # a failed assert
            s = Stmt(["try:"], [Stmt([f"assert {k} < {r.randint(1, 4)}, 'k=' + str({k})", f"{out} = {t} + 1"])],
                     [Stmt([f"{out} = {t} * len(str(e))"])], orelse_header="except AssertionError as e:")
        elif c < 0.85:     # a generator's return value
            it = self.fresh("it")
            s = Stmt([f"{it} = returning_gen({t}, {k})", f"next({it})", "try:"],
                     [Stmt([f"{out} = next({it})"])], [Stmt([f"{out} = e.value"])],
                     orelse_header="except StopIteration as e:")
        else:              # a class with its own __init__ (inlined), or uncaught
            if r.random() < 0.5:
                s = Stmt(["try:"], [Stmt([f"{out} = {t} * coded_check({k})"])], [Stmt([f"{out} = {t} - e.code"])],
                         orelse_header="except CodedError as e:")
            else:
                s = Stmt([f"if {k} > {r.randint(2, 5)}:"], [Stmt([f"raise FuzzError('too big: ' + str({k}))"])])
                s = Stmt(["if True:"], [s, Stmt([f"{out} = {t} * 1"])])
        self.env[out] = ("T", self.shape(t))
        return s

    def s_match_stmt(self):
        r = self.rng
        t = self.pick(self.tensors())
        out = self.fresh("t")
        subject = r.choice(["n", "xs", "G_DICT", "(n, len(xs))", "xs[:2]", "{'k': n, 'j': 1}", "OBJ", "str(n)"])
        pool = [("0 | 1", f"{t} + 1"), ("2", f"{t} * 2"), ("int(v) if v > 2", f"{t} * v"),
                ("[a, b]", f"{t} * a + b"), ("[a, *rest]", f"{t} - a + len(rest)"), ("[]", f"{t} - 3"),
                ("(a, 0)", f"{t} + a"), ("{'k': v, **rest}", f"{t} * v + len(rest)"), ("{'a': v}", f"{t} - v"),
                ("str() as s", f"{t} * len(s)"), ("Obj(k=k) if k > 1", f"{t} + k"), ("Obj()", f"{t} * 0.5"),
                ("[a, b, c] if a == c", f"{t} + b")]
        cases = [Stmt([f"case {pattern}:"], [Stmt([f"{out} = {body}"])]) for pattern, body in r.sample(pool, r.randint(2, 5))]
        cases.append(Stmt(["case _:"], [Stmt([f"{out} = {t} * 1"])]))
        self.env[out] = ("T", self.shape(t))
        return Stmt([f"match {subject}:"], cases)

    def s_sets_strings(self):
        r = self.rng
        lst = self.pick(self.vars_of("list_int"))
        c = r.random()
        if c < 0.3:
            return self.assign(None, ("int",), r.choice([f"len(set({lst}))", f"len(set({lst}) | {{1, 2}})",
                                                         f"sum(set({lst}) & {{0, 1, 2}})"]), "i")
        if c < 0.6:
            return self.assign(None, ("str",), r.choice([f"f'{{n}}-{{len({lst})}}'", f"'-'.join(str(v) for v in {lst})",
                                                         f"str({lst}).upper()", f"'{{}}:{{}}'.format(n, {lst})"]), "s")
        t = self.pick(self.tensors())
        return self.assign(None, ("tuple",), r.choice([f"tuple({t}.shape)", f"{t}.size()", f"({t}.dim(), {t}.dtype)",
                                                       f"str({t}.dtype)"]), "tu")

    def s_python_identity(self):
        """Identity and order, as CPython's own test suite checks them (bench/cpython_cases.py):
        each case crosses a graph break (print or an unmodelled C call) where it can."""
        r = self.rng
        brk = r.choice(["print('id', n)", "operator.length_hint(iter(xs))", None])
        breaks = [brk] if brk else []
        a = self.fresh("o")
        c = r.random()
        if c < 0.35:      # a set's order is its table's: grown, shrunk, then read after a break
            words = r.sample(WORDS, r.randint(3, len(WORDS)))
            lines = [f"{a} = set()", *(f"{a}.add({w!r})" for w in words)]
            lines += [f"{a}.discard({w!r})" for w in r.sample(words, r.randint(0, len(words) // 2))]
            if r.random() < 0.4:
                lines.append(f"{a} |= {{'zz' + str(n), 'yy'}}")
            lines += breaks + [f"{a}.add('after' + str(n))"]
            out = r.choice([f"'|'.join({a})", f"str({a})", f"{a}.pop() + str(len({a}))", f"str(list({a})[:4])"])
            return Stmt(lines + self.assign(None, ("str",), out, "s").lines)
        if c < 0.65:      # one object under two names across a break
            value, change = r.choice([("(n, 1)", None), ("slice(1, n)", None), ("{n, 2}", ".add(9)"),
                                      ("[n, 3]", ".append(9)"), ("(xs, n)", None), ("{'k': n}", ".update(q=1)")])
            lines = [f"{a} = {value}", f"{a}b = {a}", *breaks]
            if change:
                lines.append(f"{a}b{change}")
            return Stmt(lines + self.assign(None, ("int",), f"int({a}b is {a}) + len(str({a}))", "i").lines)
        if c < 0.8:       # CPython returns the argument itself; methods bound to one object are equal
            lines = [f"{a} = (n, 2)", *breaks]
            return Stmt(lines + self.assign(None, ("int",), r.choice([
                f"int(tuple({a}) is {a}) + int(xs.append == xs.append) + int(xs.append != [].append)",
                "int(xs.pop == xs.pop) + int(OBJ.scale == OBJ.scale) + int(OBJ.scale != OBJ.bump)"]), "i").lines)
        lines = [f"{a} = lambda v: v + n", *breaks]     # a function made in the frame: its names
        return Stmt(lines + self.assign(None, ("str",), f"{a}.__name__ + '/' + {a}.__qualname__", "s").lines)

    def s_frame_builtins(self):
        """Calls that read the frame they run in: they must see f's own frame (never a graph
        break's entry or a resume function)."""
        r = self.rng
        c = r.random()
        if c < 0.25 and "G_SCALE" not in self.frozen:
            return Stmt([f"globals()['G_SCALE'] = {self.int_expr(1)}"])
        if c < 0.5:
            return self.assign(None, ("int",), r.choice(["eval('n + 1')", "len(locals())",
                                                         "len([k for k in locals() if k.startswith('t')])"]), "i")
        return self.assign(None, ("str",), r.choice(["sys._getframe().f_code.co_name",
                                                     "type('K', (), {'v': n}).__module__"]), "s")

    def s_const_reads(self):
        """A tensor made from python values only, maybe written in place, then read by Python
        (the tracer knows such values: tracer/variables/constant_tensors.py)."""
        r = self.rng
        k = self.fresh("k")
        make = r.choice([f"torch.arange({self.int_expr(1)} % 4 + 2)", f"torch.tensor([n, {self.int_expr(1)}, 3])",
                         f"torch.div(torch.arange(6), 2, rounding_mode='floor')",
                         f"torch.arange(0, 8)[1:][::2] + torch.div(n + 7, 2, rounding_mode='floor')"])
        lines = [f"{k} = {make}"]
        write = r.random()
        if write < 0.15:
            lines.append(f"{k}.add_(n)")
        elif write < 0.3:
            lines.append(f"{k}[1:].mul_(2)")          # through a view
        elif write < 0.4:
            lines.append(f"{k}[0] = n + 1")
        name = self.fresh("i")
        read = r.choice([f"int({k}.sum()) + n", f"{k}.max().item() - n", f"int({k}[-1]) % 3",
                         f"[1, 2, 3][{k}[0] % 3]", f"len({k}.tolist())"])
        lines.append(f"{name} = {read}")
        self.env[name] = ("int",)
        stmt = Stmt(lines)
        tens = self.tensors(lambda sh: len(sh) == 2)
        if tens and r.random() < 0.3:
            t = self.pick(tens)
            size = self.fresh("t")
            stmt.lines.append(f"{size} = {t}.reshape(torch.tensor({t}.shape[0]), -1) + {k}.sum()")
            self.env[size] = ("T", self.shape(t))
        return stmt

    def s_iter_functional(self):
        """Generator functions, itertools, functools and operator as real code uses them, and
        the walrus operator (the prelude block ``ITER_PRELUDE`` holds the helpers)."""
        r = self.rng
        lists = self.vars_of("list_int")
        lst, other = self.pick(lists), self.pick(lists)
        mutable = [v for v in lists if v not in ARGS and v not in self.frozen]
        t = self.pick(self.tensors())
        sh = self.shape(t)
        same = self.tensors(lambda s2: s2 == sh)
        k = r.choice([str(r.randint(0, 3)), "min(n, 3)", f"len({lst})", "n % 3"])
        if r.random() < 0.08:   # callables and iterators made here, kept past a break, then used
            p, g, ch, cnt, out, i = (self.fresh(kind) for kind in ("p", "g", "ch", "cnt", "t", "i"))
            self.env[out], self.env[i] = ("T", sh), ("int",)
            return Stmt([f"{p} = functools.partial(helper_add, b={k}, scale=n)", f"{g} = operator.itemgetter(0)",
                         f"{ch} = itertools.chain({lst}, [n])", f"{cnt} = itertools.count(n)", f"next({cnt})",
                         r.choice([f"print('kept', len({lst}))", "pass"]), f"{out} = {p}({t})",
                         f"{i} = {g}({lst} + [1]) + sum({ch}) + next({cnt})"])
        c = r.random()
        if c < 0.08:        # a generator function consumed by a builtin
            return self.assign(None, ("list_int",), r.choice([
                f"list(gen_count({k}))", f"list(gen_from({lst}))", f"list(gen_until({lst}))",
                f"[v + 1 for v in gen_from({lst}, n)]", f"list(gen_print({lst}))", f"sorted(gen_from({other}, 1))"]), "l")
        if c < 0.14:
            return self.assign(None, ("int",), r.choice([
                f"sum(gen_count({k}))", f"next(gen_count({k}), -1)", f"next(gen_from({lst}))",
                f"max(gen_from({lst}, n))", f"sum(gen_print({lst}))", f"len(list(gen_pairs({lst})))",
                f"sum(b - a for a, b in gen_pairs({lst}))"]), "i")
        if c < 0.22:        # generators over tensors
            if r.random() < 0.25:   # values sent in (through yield from too), the return value read
                g = self.fresh("g")
                gen = r.choice(["gen_accumulate", "gen_relay"])
                lines = [f"{g} = {gen}({t})", f"next({g})", f"{g}.send({self.int_expr(1)})"]
                out = self.fresh("t")
                self.env[out] = ("T", sh)
                if r.random() < 0.5:
                    return Stmt(lines + [f"{out} = {g}.send({r.choice([t, '1.5'])})"])
                finish = Stmt(["try:"], [Stmt([f"{out} = {g}.send(None)"])], [Stmt([f"{out} = e.value"])],
                              orelse_header="except StopIteration as e:")
                return Stmt(["if True:"], [Stmt(lines), finish])
            if r.random() < 0.5:
                return self.assign(None, ("T", sh), r.choice([
                    f"sum(gen_tensors({t}, 3), torch.zeros_like({t}))", f"next(gen_tensors({t}, 1))",
                    f"torch.stack(list(gen_nested({t}, {lst}))).sum(0)" if len(sh) <= 2 else f"{t} + 1",
                    f"max(gen_tensors({t}, 2), key=lambda u: float(u.sum()))"]), "t")
            return self.assign(None, ("list_T", sh), r.choice([
                f"list(gen_tensors({t}, {k}))", f"list(gen_nested({t}, {lst}))",
                f"[u.relu() for u in gen_tensors({t})]"]), "tl")
        if c < 0.32:        # for over a generator
            acc, v = self.fresh("t"), self.fresh("v")
            self.env[acc] = ("T", sh)
            header, bind = r.choice([
                (f"for {v} in gen_count({k}):", {v: ("int",)}),
                (f"for {v} in gen_from({lst}):", {v: ("int",)}),
                (f"for {v} in gen_until({lst}, n):", {v: ("int",)}),
                (f"for {v} in itertools.islice(gen_count(9), {r.randint(0, 3)}):", {v: ("int",)}),
                (f"for {v} in gen_tensors({t}, {k}):", {v: ("T", sh)})])
            frozen = set(self.frozen)
            self.frozen |= {w for w in self.env if w in header} | {"xs", "ts", "G_LIST", acc}
            self.in_loop += 1
            step = Stmt([f"{acc} = {acc} * 0.5 + {v}"])
            body = [step] + (self.scoped_block(r.randint(0, 2), lambda: self.env.update(bind))
                             if r.random() < 0.5 else [])
            self.in_loop -= 1
            self.frozen = frozen
            return Stmt([f"{acc} = {t} + 0", header], body)
        if c < 0.4:         # a generator kept in a variable, consumed in parts (a statement between)
            g, a, b = self.fresh("g"), self.fresh("i"), self.fresh("l")
            make = r.choice([f"gen_count({k})", f"gen_from({lst})", f"iter({lst})", f"gen_print({lst})"])
            mid = r.choice([f"print('mid', {a})", f"{self.fresh('t')} = {t} * {a}", "pass",
                            f"{self.fresh('t')} = {t}.sum() * 2"])
            self.env[a] = ("int",)
            self.env[b] = ("list_int",)
            if mid.startswith("t"):
                name = mid.split(" ")[0]
                self.env[name] = ("T", sh if "sum()" not in mid else ())
            return Stmt([f"{g} = {make}", f"{a} = next({g}, n)", mid, f"{b} = list({g})"])
        if c < 0.48:        # unpacking a generator
            a, b = self.fresh("i"), self.fresh("l")
            self.env[a] = ("int",)
            if r.random() < 0.5:
                self.env[b] = ("list_int",)
                return Stmt([f"{a}, *{b} = gen_from({lst})"])
            self.env[b] = ("int",)
            return Stmt([f"{a}, {b} = gen_count(2)"])
        if c < 0.6:         # itertools
            if r.random() < 0.6:
                return self.assign(None, ("list_int",), r.choice([
                    f"list(itertools.chain({lst}, {other}))", f"list(itertools.chain.from_iterable([{lst}, [n]]))",
                    f"list(itertools.islice({lst}, {r.randint(0, 3)}))", f"list(itertools.accumulate({lst}))",
                    f"list(itertools.accumulate({lst}, operator.mul, initial=1))",
                    f"list(itertools.repeat(n, {r.randint(0, 3)}))",
                    f"list(itertools.islice(itertools.cycle({lst} + [1]), 4))",
                    f"[a * b for a, b in itertools.product({lst}, range(2))]",
                    f"list(itertools.starmap(operator.sub, zip({lst}, {other})))"]), "l")
            if r.random() < 0.5:
                return self.assign(None, ("int",), r.choice([
                    f"sum(itertools.starmap(operator.mul, zip({lst}, {other})))",
                    f"sum(b - a for a, b in itertools.pairwise({lst}))",
                    f"len(list(itertools.product({lst}, repeat=2)))",
                    f"sum(itertools.chain(gen_count({k}), {lst}))"]), "i")
            if r.random() < 0.5:
                name = self.fresh("pr")
                self.env[name] = ("view",)
                return Stmt([f"{name} = list({r.choice(['itertools.pairwise', 'itertools.product', 'enumerate'])}({lst}))"])
            u = self.pick(same)
            return self.assign(None, ("T", sh), r.choice([
                f"list(itertools.accumulate([{t}, {u}, {t}], operator.add))[-1]",
                f"sum((w * j for j, w in zip(itertools.count(1), [{t}, {u}])), {t})",
                f"torch.stack(list(itertools.repeat({t}, 2))).sum(0)" if len(sh) <= 2 else f"{t} * 2",
                f"functools.reduce(operator.add, itertools.chain([{t}], gen_tensors({u})))"]), "t")
        if c < 0.72:        # functools
            u = self.pick(same)
            if r.random() < 0.35:
                return self.assign(None, ("int",), r.choice([
                    f"functools.reduce(operator.mul, {lst}, 1)", f"functools.reduce(max, {lst}, n)",
                    f"functools.reduce(lambda a, b: a * 2 + b, {lst}, 0)",
                    f"functools.partial(max, 1)(n)", f"functools.reduce(operator.add, gen_count({k}), n)"]), "i")
            if r.random() < 0.5:
                p, out = self.fresh("fn"), self.fresh("t")
                self.env[out] = ("T", sh)
                make, call = r.choice([
                    ("functools.partial(scaled, k=n)", f"{p}({u})"),
                    (f"functools.partial(scaled, bias={self.float_expr()})", f"{p}({u}, 3)"),
                    ("functools.partial(torch.add, alpha=2)", f"{p}({t}, {u})"),
                    ("functools.partial(scaled, k=2, bias=n)", f"{p}({u})"),
                    ("functools.partial(functools.partial(scaled, k=n), bias=1.5)", f"{p}({u}, k=2)")])
                return Stmt([f"{p} = {make}", f"{out} = {call}"])
            return self.assign(None, ("T", sh), r.choice([
                f"functools.reduce(operator.add, [{t}, {u}, {t}])",
                f"functools.reduce(lambda a, b: a * 0.5 + b, [{u}, {t}], {t})",
                f"functools.reduce(torch.maximum, [{t}, {u}])"]), "t")
        if c < 0.84:        # operator
            u = self.pick(same)
            d = r.random()
            if d < 0.3:
                return self.assign(None, ("int",), r.choice([
                    f"operator.itemgetter(0)({lst} + [n])", f"operator.add(n, len({lst}))",
                    f"operator.attrgetter('k')(OBJ)", f"operator.mul(n, {self.int_expr(1)})",
                    f"operator.getitem({lst} + [1], -1)", f"operator.index(n) + 1"]), "i")
            if d < 0.5:
                return self.assign(None, ("tuple",), r.choice([
                    f"operator.itemgetter(-1, 0)({lst} + [1])", f"operator.attrgetter('shape', 'dtype')({t})",
                    f"tuple(sorted(zip({lst}, {other}), key=operator.itemgetter(1)))"]), "tu")
            if d < 0.6 and mutable:
                m = self.pick(mutable)
                name = self.fresh("l")
                self.env[name] = ("list_int",)
                return Stmt([f"{name} = operator.iadd({m}, [n])"])
            return self.assign(None, ("T", sh), r.choice([
                f"operator.mul({t}, 2)", f"operator.add({t}, {u})", f"operator.neg({t})",
                f"operator.truediv({t}, {u}.abs() + 1)", f"operator.pow({t}, 2)",
                f"operator.attrgetter('T')({t}).T" if len(sh) == 2 else f"{t} + 1",
                f"list(map(operator.mul, [{t}, {u}], [1, 2]))[1]"]), "t")
        # the walrus operator
        d = r.random()
        w = self.fresh("w")
        if d < 0.3:
            self.env[w] = ("int",)
            body = self.scoped_block(r.randint(1, 2))
            return Stmt([f"if ({w} := len({lst}) + n) > {r.randint(0, 3)}:"], body)
        if d < 0.5:
            out = self.fresh("t")
            self.env[w] = ("T", sh)
            self.env[out] = ("T", sh)
            return Stmt([f"{out} = ({w} := {t} * 2) + {w}.sin()"])
        if d < 0.75:         # a comprehension binds the name in f's scope (a cell of f)
            out = self.fresh("l")
            self.env[w] = ("int",)
            self.env[out] = ("list_int",)
            return Stmt([f"{w} = n", f"{out} = [v for v in {lst} if ({w} := v * 2) > {r.randint(0, 3)}]"])
        cnt = self.fresh("c")
        self.env[cnt] = ("int",)
        frozen = set(self.frozen)
        self.frozen |= {cnt, "xs"}
        self.in_loop += 1
        body = self.scoped_block(r.randint(1, 2))
        self.in_loop -= 1
        self.frozen = frozen
        return Stmt([f"{cnt} = 0", f"while ({cnt} := {cnt} + 1) < {r.choice(['3', 'min(n, 4)', 'len(xs) + 1'])}:"], body)

    def s_factories(self):
        r = self.rng
        t = self.pick(self.tensors(lambda s: s == ("B", "C")))
        c = r.random()
        if c < 0.25:
            return self.assign(None, ("T", ("L",)), r.choice([
                f"torch.tensor({self.pick(self.vars_of('list_int'))} + [n], dtype=torch.float32)",
                f"torch.tensor([n, {self.int_expr(1)}, 1.5])",
                f"torch.as_tensor(xs + [0], dtype={t}.dtype)"]), "tf")
        if c < 0.45:
            return self.assign(None, ("T", ("N",)), r.choice([f"torch.arange(max(n, 0) + 1)",
                                                             f"torch.arange(n, n + 3) * 0.5",
                                                             f"torch.linspace(0, n, 4)"]), "tf")
        if c < 0.75:
            return self.assign(None, ("T", ("B", "C")), r.choice([
                f"torch.full_like({t}, n)", f"{t}.new_ones({t}.shape) * {self.int_expr(1)}",
                f"torch.zeros({t}.shape[0], {t}.shape[1], dtype={t}.dtype) + n",
                f"{t} + torch.tensor(n)", f"{t} * torch.tensor({self.float_expr()}, dtype=torch.float64)",
                f"torch.ones_like({t}) * len(xs)"]), "t")
        return self.assign(None, ("T", ("C",)), f"torch.zeros({t}.shape[1]) + {t}[0]", "t")

    def s_index_ops(self):
        r = self.rng
        t = self.pick(self.tensors(lambda s: 1 <= len(s) <= 3))
        s = self.shape(t)
        d = r.randrange(len(s))
        drop = s[:d] + s[d + 1:]
        one = s[:d] + ("1",) + s[d + 1:]
        fill = r.choice(["0.0", "-float('inf')", "n"])
        options = [
            # permutations by a sort: ties change the indices, never the values they pick
            (f"torch.gather({t}, {d}, {t}.argsort(dim={d}))", s),
            (f"torch.zeros_like({t}).scatter_add({d}, {t}.argsort(dim={d}), {t})", s),
            (f"{t}.sort(dim={d}{r.choice(['', ', descending=True'])}).values", s),
            (f"{t}.sort(dim={d}, stable=True).indices", s),
            (f"torch.index_select({t}, {d}, torch.arange({t}.shape[{d}] - 1, -1, -1))", s),
            (f"{t}.flip({d})", s), (f"{t}.roll({r.randint(-2, 2)}, {d})", s),
            (f"{t}.argmax(dim={d})", drop), (f"{t}.argmin(dim={d}, keepdim=True)", one),
            (f"{t}.topk(1, dim={d}).values", one), (f"{t}.topk(1, dim={d}, largest=False).values", one),
            (f"torch.take_along_dim({t}, {t}.argmax(dim={d}, keepdim=True), dim={d})", one),
            (f"{t}.softmax(dim={d})", s), (f"torch.log_softmax({t}, dim={d})", s),
            (f"{t}.masked_fill({t} > {self.float_expr()}, {fill})", s),
            (f"{t}.cumsum(dim={d})", s), (f"{t}.diff(dim={d})", s[:d] + (f"{s[d]}-1",) + s[d + 1:]),
            (f"torch.nn.functional.layer_norm({t}, ({t}.shape[-1],))", s),
            (f"torch.nn.functional.pad({t}, (1, 2))", s[:-1] + (f"{s[-1]}+3",)),
            (f"torch.nn.functional.one_hot({t}.argmax(dim=-1), {t}.shape[-1])", s),
            (f"{t}[{t} > 0].sum()", ()), (f"{t}[{t} > 0]", (self.fresh("?"),)),
            (f"({t} > 0).nonzero().shape[0] * {t}", s), (f"{t}.count_nonzero(dim={d})", drop),
            (f"({t} > 0).any(dim={d})", drop), (f"torch.isfinite({t}).all()", ()),
            (f"{t}.unsqueeze(0).expand(2, *{t}.shape)", ("2",) + s),
        ]
        if len(s) == 1:
            options.append((f"{t}[torch.arange({t}.shape[0]).flip(0)]", s))
            options.append((f"{t}[{t}.argsort()[:1]]", ("1",)))
        if len(s) == 2:
            options += [(f"torch.tril({t})", s), (f"{t}.triu({r.randint(-1, 1)})", s),
                        (f"{t}[:, [0, -1]]", (s[0], "2")), (f"{t}[[0, -1]]", ("2", s[1])),
                        (f"{t}[torch.arange({t}.shape[0]), {t}.argmax(dim=1)]", (s[0],)),
                        (f"{t}[{t}.argmax(dim=0)]", (s[1], s[1])),
                        (f"{t}.repeat(2, 1)", (f"2{s[0]}", s[1])),
                        (f"torch.einsum('ij,kj->ik', {t}, {t})", (s[0], s[0])),
                        (f"{t}.index_fill(1, torch.tensor([0]), -1.0)", s)]
        expr, shape = r.choice(options)
        if len(shape) > 3:
            return None
        return self.assign(None, ("T", shape), expr, "t")

    def s_tensor_iter(self):
        r = self.rng
        t = self.pick(self.tensors(lambda s: s == ("B", "C")))
        c = r.random()
        if c < 0.3:
            return self.assign(None, ("list_T", ("C",)), r.choice([f"list({t})", f"list({t}.unbind(0))",
                                                                    f"[row * 2 for row in {t}]"]), "tl")
        if c < 0.6:
            acc = self.fresh("t")
            row = self.fresh("row")
            self.env[acc] = ("T", ("C",))
            return Stmt([f"{acc} = torch.zeros({t}.shape[1], dtype={t}.dtype)", f"for {row} in {t}:",
                         f"    {acc} = {acc} + {row}.relu()"])
        a, b = self.fresh("t"), self.fresh("t")
        self.env[a] = ("T", ("?1",))
        self.env[b] = ("T", ("?2",))
        return Stmt([f"{a}, *{b} = {t}.{r.choice(['split(1)', 'chunk(2)', 'unbind(1)'])}",
                     f"{b} = {b}[0] if {b} else {a}"])

    def s_attr_probe(self):
        r = self.rng
        c = r.random()
        if c < 0.4:
            return self.assign(None, ("bool",), r.choice(["hasattr(OBJ, 'extra')", "hasattr(MOD, 'note')",
                                                          "hasattr(OBJ, 'k')", "hasattr(Obj, 'K')"]), "b")
        if c < 0.7:
            return self.assign(None, ("int",), r.choice(["getattr(OBJ, 'extra', -1)", "getattr(MOD, 'note', 7)",
                                                         "getattr(OBJ, 'k')"]), "i")
        return Stmt([r.choice([f"setattr(OBJ, 'extra', {self.int_expr(1)})", "OBJ.extra = n",
                               "if hasattr(OBJ, 'extra'): del OBJ.extra", "if hasattr(OBJ, 'extra'): delattr(OBJ, 'extra')"])])

    def s_class_protocols(self):
        r = self.rng
        c = r.random()
        if c < 0.3:
            t = self.pick(self.tensors())
            return self.assign(None, ("T", self.shape(t)), r.choice([
                f"{t} * BOX.cached.sum()", f"Pair({t}).q", f"Pair({t}, {t} + 1).q - {t}",
                f"tuple.__new__(Pair, ({t}, {t} * 3)).q", f"{t} + BOX.level"]), "t")
        if c < 0.5:
            return self.assign(None, ("int",), r.choice([
                "BOX.level", "SLOT.a", "getattr(SLOT, 'b', -1)", "len(Pair(n))", "Pair(n).q + 1",
                "int(hasattr(SLOT, 'b'))", "int('cached' in BOX.__dict__)"]), "i")
        return Stmt([r.choice([f"BOX.level = {self.int_expr(1)}", "BOX.level += 3", f"SLOT.a = {self.int_expr(1)}",
                               "SLOT.a += 1", f"SLOT.b = {self.int_expr(1)}", "if hasattr(SLOT, 'b'): del SLOT.b"])])

    def s_own_protocols(self):
        r = self.rng
        t = self.pick(self.tensors())
        c = r.random()
        if c < 0.3:
            return self.assign(None, ("int",), r.choice([
                "sum(BAG) + n", "len([v for v in DOUBLER]) + sum(DOUBLER)", "int(2 in BAG) + int(n in DOUBLER)",
                "max(BAG, default=n)", "len(list(zip(BAG, DOUBLER)))", "sum(a * b for a, b in zip(BAG, BAG))"]), "i")
        if c < 0.45:
            acc = self.fresh("t")
            self.env[acc] = ("T", self.shape(t))
            return Stmt([f"{acc} = {t}", f"for v in {r.choice(['BAG', 'DOUBLER'])}:"],
                        body=[Stmt([f"{acc} = {acc} * 0.5 + v"])])
        if c < 0.6:
            return self.assign(None, ("int",), f"BUMP({r.randint(0, 3)}) + n", "i")
        if c < 0.8:
            return Stmt(["NS.step += 1"] + self.assign(None, ("T", self.shape(t)), r.choice([
                f"{t} * NS.scale if NS.step > {r.randint(0, 4)} else {t} - 1",
                f"{t} + 1 if NS.step - n >= 2 else {t}"]), "t").lines)
        out = self.fresh("t")
        self.env[out] = ("T", self.shape(t))
        return Stmt([f"{out} = {t}", f"with RawGrad({r.choice(['False', 'True'])}):"],
                    body=[Stmt([f"{out} = {out} * 2 + int(torch.is_grad_enabled())"])])

    def s_stdlib_more(self):
        r = self.rng
        lst = self.pick(self.vars_of("list_int"))
        c = r.random()
        if c < 0.2:
            q = self.fresh("q")
            lines = [f"{q} = collections.deque({lst}, maxlen={r.randint(0, 4)})",
                     *r.sample([f"{q}.append(n)", f"{q}.appendleft(len({lst}))", f"{q}.extend([n, 7])",
                                f"{q}.extendleft([5])", f"{q}.rotate(1)"], r.randint(1, 4))]
            return Stmt(lines + self.assign(None, ("int",), f"sum({q}) + len({q}) + ({q}.maxlen or 0)", "i").lines)
        if c < 0.3:
            return Stmt([r.choice(["G_DQ.append(n)", "G_DQ.appendleft(len(xs))", "G_DQ.rotate(1)",
                                   "G_DQ.popleft() if G_DQ else None", "G_DQ.extend([n, n])"])])
        if c < 0.42:
            return self.assign(None, ("int",), r.choice(["Color(n % 3 + 1).value", "Color(len(xs) % 3 + 1).value * 2",
                                                         "len(Color(2).name)", "int(Color(Color.RED) is Color.RED)"]), "i")
        if c < 0.52:
            return Stmt([f"G_OD.move_to_end({r.choice(['p', 'q', 'r'])!r}, last={r.choice(['True', 'False'])})"] +
                        self.assign(None, ("str",), "'-'.join(G_OD)", "s").lines)
        if c < 0.64:
            if r.random() < 0.3:
                return Stmt(["MEMO.__dict__.pop('table', None)"])
            return self.assign(None, ("int",), "MEMO.table[0] + MEMO.calls", "i")
        if c < 0.78:
            return Stmt([r.choice(["FUZZ_LOG.warning('w %s', n)", "FUZZ_LOG.info('i %d', len(xs))",
                                   "FUZZ_LOG.debug('not kept')", "FUZZ_LOG.error('e')"])])
        if c < 0.88:
            return self.assign(None, ("int",), f"len(str({{'a': n, 'b': len({lst})}}))", "i")
        acc = self.fresh("i")
        return Stmt([f"{acc} = 0", "for k, v in G_DICT.items():"],
                    body=[Stmt([f"{acc} = {acc} + v", "print('key', k)"])])

    def s_tensor_attrs(self):
        r = self.rng
        t = self.pick(self.tensors())
        c = r.random()
        if c < 0.35:
            return Stmt([f"{t}.tag = {self.int_expr(1)}"])
        if c < 0.5:
            return Stmt([f"mark_static({t}, {r.choice(['True', 'False'])})"])
        if c < 0.8:
            return self.assign(None, ("int",), f"getattr({t}, 'tag', -1)", "i")
        return self.assign(None, ("bool",), r.choice([f"hasattr({t}, '_static')", f"hasattr({t}, 'tag')"]), "b")

    def s_random_ops(self):
        r = self.rng
        t = self.pick(self.tensors())
        if r.random() < 0.3:           # LayerDrop: a draw compared with a probability
            d = self.fresh("d")
            write = r.choice(["", f"    {d}.mul_(2)\n", f"    {d} = {d} * 3\n"])
            cmp = r.choice(["<", "<=", ">", ">="])
            p = r.choice(["0.0", "1.0", "0.5", "-1", "2", "G_W"])
            self.env[t] = ("T", self.shape(t))
            return Stmt([f"{d} = torch.rand([])", *([write.strip()] if write else []),
                         f"if {d} {cmp} {p}:", f"    {t} = {t} * 2"])
        return self.assign(None, ("T", self.shape(t)), r.choice([
            f"{t} + torch.rand_like({t})", f"torch.nn.functional.dropout({t}, p=0.5, training=True)",
            f"{t} * torch.randn({t}.shape, dtype={t}.dtype)", f"torch.nn.functional.dropout({t}, 0.3, MOD.training)"]), "t")

    def s_metadata_inplace(self):
        r = self.rng
        if self.depth or self.in_loop:
            return None
        c = r.random()
        if c < 0.4:
            v = r.choice(["x", "y"])
            sh = self.shape(v)
            if len(sh) != 2:
                return None
            self.env[v] = ("T", (sh[1], sh[0]))
            return Stmt([f"{v}.t_()"])
        if c < 0.7:
            v = r.choice(["x", "y"])
            self.env[v] = ("T", ("1",) + self.shape(v))
            return Stmt([f"{v}.unsqueeze_(0)"])
        if c < 0.85:
            return Stmt(["x.requires_grad_(not x.requires_grad) if x.is_leaf else None"])
        return Stmt([f"{r.choice(['x', 'y'])}.detach_()"])

    def ret_expr(self) -> str:
        r = self.rng
        live = [v for v, t in self.env.items() if t[0] in ("T", "int", "float", "bool", "list_int", "dict_int",
                                                          "list_T", "view", "str", "obj", "tuple")]
        c = r.random()
        pick = r.sample(live, min(len(live), r.randint(1, 4)))
        if c < 0.15:
            return pick[0]
        if c < 0.25:
            return "{" + ", ".join(f"'{v}': {v}" for v in pick) + "}"
        if c < 0.3:
            return "[" + ", ".join(pick) + "]"
        return "(" + ", ".join(pick) + ",)"


# A float tensor made integer the way a program that means it would: in range, NaN as 0 (a NaN,
# an infinity or 1e30 converted as it is is undefined in C++, and INT64_MIN % -1 kills eager
# with SIGFPE).
INT = "({v}).clamp(-1e6, 1e6).nan_to_num(0.0).{to}()"
ARGS = ("x", "y", "n", "xs", "ts")
STMT_KINDS = [name for name in FEATURES if not name.startswith(("vary_", "reuse_", "state_mutation", "arg_aliasing",
                                                                 "tensor_views", "special_values"))
              and name not in ("zero_divisors", "host_sources", "second_order")]
COMPOUND = {"graph_breaks", "try_except", "user_raise", "match_stmt", "grad_mode", "autocast", "user_ctx", "if_python", "for_range", "for_list", "while_loop", "early_return", "loop_mutation", "data_dependent"}


# ----------------------------------------------------------------------------- steps

MUTATIONS: dict[str, list[str]] = {
    "grad_mode": ["torch.set_grad_enabled(False)", "torch.set_grad_enabled(True)"],
    "autocast": ["torch.set_autocast_enabled('cpu', True)", "torch.set_autocast_enabled('cpu', False)",
                 "torch.set_autocast_dtype('cpu', torch.float16)", "torch.set_autocast_dtype('cpu', torch.bfloat16)"],
    "state_mutation": [
        "OBJ.k = 5", "OBJ.k = 0", "OBJ.w = -1.0", "OBJ.flag = not OBJ.flag", "OBJ.items.append(4)",
        "MOD.count = 3", "MOD.enabled = not MOD.enabled", "MOD.eval()", "MOD.train()",
        "G_SCALE = 7", "G_SCALE = 2.5", "G_W = 3.0", "G_LIST.append(5)", "G_LIST.clear()", "G_LIST[:] = [3, 1, 2]",
        "G_DICT['c'] = 3", "G_DICT.pop('a', None)",
        "Obj.scale = lambda self, t: t - self.k",
        "helper_tensor = lambda t, k=2: t.sigmoid() * k",
        "helper_add = lambda a, b=1, *, scale=1: a - b * scale",
        "MOD.act = torch.nn.Tanh()",
        "with torch.no_grad():\n    MOD.scale.mul_(2)",
        "MOD.shift = torch.tensor(1.0, dtype=torch.float64)",
        "OBJ = Obj()",
        "Obj.double_k = property(lambda self: self.k * 3)",
        "MOD.register_forward_pre_hook(lambda m, a: (a[0] * 2,))",
        "MOD.register_forward_hook(lambda m, a, out: out - 1)",
        "OBJ.extra = 4", "MOD.note = 9", "Obj.extra = 11",
        "MOD.act = torch.nn.Identity()",
    ],
    "buffer_updates": [
        "CACHE.store.fill_(1.0)", "CACHE.pos = 0", "CACHE.pos = 5", "CACHE.history = None",
        "CACHE.store = torch.zeros(6, 5)", "CACHE.store = torch.ones(6, 5, dtype=torch.float64)",
        "CACHE.register_buffer('count', torch.tensor(3))", "CACHE.count.zero_()",
        "CACHE.history = torch.arange(3.0)",
    ],
    "nn_layers": [
        "LAYERS.eval()", "LAYERS.train()", "LAYERS['bn'].momentum = None", "LAYERS['bn'].reset_running_stats()",
        "with torch.no_grad():\n    LAYERS['lin'].weight.mul_(2)", "LAYERS['drop'].p = 0.0",
        "LAYERS['ln'].eps = 1e-2", "LAYERS['bn'].track_running_stats = False",
    ],
    "module_tree": [
        "NET.blocks.append(Affine(0.3, 0.2))", "NET.blocks[1] = torch.nn.Sigmoid()",
        "if len(NET.blocks) > 1:\n    del NET.blocks[0]", "NET.blocks.insert(0, torch.nn.ReLU())",
        "NET.named['a'] = Affine(-0.5, 1.0)", "NET.named['c'] = torch.nn.Tanh()", "NET.pick = 'b'",
        "NET.pick = 'c'", "if 'b' in NET.named:\n    NET.named.pop('b')", "NET.seq.append(torch.nn.Tanh())",
        "NET.seq[0].bias = None", "NET.seq[0].weight = torch.nn.Parameter(torch.tensor(0.7))",
        "NET.seq[0].weight.data = torch.tensor(2.0, dtype=torch.float64)",
        "NET.seq[0].weight.requires_grad_(False)", "NET.extra.append(torch.nn.Parameter(torch.tensor(-1.0)))",
        "NET.double()", "NET.float()", "NET.eval()", "NET.train()",
        "HANDLES.append(NET.blocks[0].register_forward_hook(lambda m, a, o: o * 2))",
        "HANDLES.append(NET.seq.register_forward_pre_hook(lambda m, a: (a[0] + 1,)))",
        "if HANDLES:\n    HANDLES.pop().remove()",
        "NET.apply(lambda m: setattr(m, 'k', 3) if isinstance(m, Affine) else None)",
        "with torch.no_grad():\n    NET.blocks[0].weight.fill_(0.25)" ,
        "torch.nn.init.constant_(NET.named['a'].weight, -2.0)", "NET.offset = torch.tensor(0.5)",
        "if len(NET.blocks) > 2:\n    NET.blocks[2].__class__ = Tripled",
        "NET.seq[0].forward = lambda t: t - 1", "Affine.forward = lambda self, t: t * self.weight - self.k",
    ],
    "library_state": ["OBJ.act = torch.tanh", "OBJ.act = torch.sigmoid", "OBJ.act = torch.neg"],
    "class_attr": ["Obj.K = 7", "Obj.K = -1"],
    "class_protocols": ["BOX.__dict__.pop('cached', None)", "BOX.level = 8", "SLOT.a = 4", "SLOT.b = 2",
                        "Clamped.__set__ = lambda self, obj, value: setattr(obj, '_level', value * 2)",
                        "Lazy.__get__ = lambda self, obj, cls=None: self if obj is None else self.fn(obj) + 1",
                        "Pair.__new__ = staticmethod(lambda cls, p, q=None: PairBase.__new__(cls, p, p if q is None else q))"],
    "grad_reads": ["MOD.zero_grad()", "MOD.scale.grad = torch.tensor(2.0)"],
    "user_raise": ["FuzzError.__str__ = lambda self: 'patched'", "RAISE_LIMIT[0] = 2", "RAISE_LIMIT[0] = 6",
                   "CodedError.code = 5", "CodedError.__init__ = lambda self, message, code=0: None"],
    "user_ctx": ["Tracked.swallow_all = True", "Tracked.swallow_all = False", "Tracked.__exit__ = Tracked.exit_quietly",
                 "TRACKED.tag = 9", "CTX_LOG.clear()"],
    "default_dtype": ["torch.set_default_dtype(torch.float64)", "torch.set_default_dtype(torch.float32)"],
    "own_protocols": ["BAG.items.append(5)", "BAG.items = []", "Bag.__iter__ = lambda self: reversed(self.items)",
                      "DOUBLER.items = [3]", "BUMP = make_counter()", "NS.step = 10", "NS.step = 0",
                      "NS.scale = 2", "Doubler.__iter__ = lambda self: iter([7])"],
}


def gen_steps(rng: random.Random, features: frozenset) -> list[tuple]:
    base = {"B": rng.choice([2, 3]), "C": rng.choice([3, 4]), "dtype": "float32", "n": rng.randint(0, 3),
            "xs": [rng.randint(0, 4) for _ in range(rng.randint(0, 3))], "nts": rng.randint(0, 2),
            "seed": rng.randrange(1000), "reuse": False, "alias": False, "view": False, "grad": False}
    if "vary_grad" in features:
        base["grad"] = rng.random() < 0.4
    if "second_order" in features:
        base["second_order"] = rng.random() < 0.5
    steps: list[tuple] = [("call", dict(base))]
    variations = ["values"]
    if "vary_shape" in features:
        variations += ["shape"] * 2
    if "vary_dtype" in features:
        variations += ["dtype"] * 2
    if "vary_python" in features:
        variations += ["n", "n", "xs", "nts"]
    if "reuse_args" in features:
        variations += ["reuse"]
    if "arg_aliasing" in features:
        variations += ["alias"]
    if "tensor_views" in features:
        variations += ["view", "grad", "shadow", "autograd_view"]
    if "vary_grad" in features:
        variations += ["grad", "no_grad"]
    if "special_values" in features:
        variations += ["special"]
    mutations = [m for feat, ms in MUTATIONS.items() if feat in features for m in ms]
    prev = base
    for _ in range(rng.randint(2, 6)):
        if mutations and rng.random() < 0.3:
            steps.append(("exec", rng.choice(mutations)))
            if rng.random() < 0.7:
                steps.append(("call", dict(prev, reuse=False, seed=rng.randrange(1000))))
            continue
        spec = dict(base if rng.random() < 0.3 else prev)
        spec["reuse"] = False
        spec["seed"] = rng.randrange(1000)
        v = rng.choice(variations)
        if v == "shape":
            spec["B"], spec["C"] = rng.choice([1, 2, 3, 4]), rng.choice([2, 3, 5])
        elif v == "dtype":
            spec["dtype"] = "float64" if spec["dtype"] == "float32" else "float32"
        elif v == "n":
            spec["n"] = rng.choice([0, 1, 2, 3, 4, -1])
        elif v == "xs":
            spec["xs"] = [rng.randint(0, 4) for _ in range(rng.randint(0, 4))]
        elif v == "nts":
            spec["nts"] = rng.randint(0, 3)
        elif v == "reuse":
            spec = dict(prev, reuse=True)
        elif v in ("alias", "view", "grad"):
            spec[v] = True
        elif v == "no_grad":
            spec["grad"] = False
        elif v == "special":
            spec["special"] = [(rng.choice("xy"), rng.randrange(4), rng.randrange(5),
                                rng.choice(["nan", "inf", "-inf", "-0.0", "1e30"])) for _ in range(rng.randint(1, 2))]
        elif v == "autograd_view":   # oracle.autograd_view_of
            spec[v] = rng.choice(["leaf", "no_grad", "multi", "activation"])
        elif v == "shadow":   # oracle.SHADOWS: attributes on x hiding some of its methods
            spec[v] = rng.sample(["size", "dim", "sum", "relu", "abs"], rng.randint(1, 5))
        steps.append(("call", spec))
        prev = spec
    return steps


def generate(seed: int, index: int, features: frozenset = ALL_FEATURES) -> Program:
    rng = random.Random(program_seed(seed, index))
    g = Gen(rng, frozenset(features))
    body = g.gen_block(rng.randint(4, 16))
    if not g.with_xs:
        body.insert(0, Stmt(["xs = [n, 1, 2]"]))
    ret = g.ret_expr()
    steps = gen_steps(rng, g.features)
    used = set(g.used)
    for kind, step in steps:
        if kind == "exec":
            used.update(f for f, ms in MUTATIONS.items() if step in ms)
    params = ("x", "y", "n") + (("xs",) if g.with_xs else ()) + (("ts",) if g.with_ts else ())
    prelude = list(PRELUDE) + ([ITER_PRELUDE] if "iter_functional" in used else []) + \
        ([CTX_PRELUDE] if "user_ctx" in used else []) + ([RAISE_PRELUDE] if "user_raise" in used else []) + \
        ([NET_PRELUDE] if "module_tree" in used else []) + ([CACHE_PRELUDE] if "buffer_updates" in used else []) + \
        ([LAYERS_PRELUDE] if "nn_layers" in used else []) + ([PROTOCOL_PRELUDE] if "class_protocols" in used else []) + \
        ([STDLIB_PRELUDE] if "stdlib_more" in used else []) + ([OWN_PRELUDE] if "own_protocols" in used else [])
    return Program(seed, index, prelude, body, ret, steps, used, set(g.globals_declared), params)

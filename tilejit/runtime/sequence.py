"""Programs of several launches: ``with T.Kernel`` blocks one after another in one
function, and the global scratch tensors they share (``T.alloc_global`` before the first
block), as TileLang writes a split-K decode (a kernel of partial results, then a kernel
that combines them) or a fused MoE (one kernel per product):

    def decode(Q, K, V, Out):
        lse = T.alloc_global([b, h, splits], T.float32)      # scratch, shared
        partial = T.alloc_global([b, h, splits, d], T.float16)
        with T.Kernel(b, h, splits, threads=128) as (bx, by, bz):   # launch 1
            ...
        with T.Kernel(h, b, threads=128) as (by, bz):               # launch 2
            ...

A ``KernelSequence`` compiles each block as a kernel of its own (``KernelFunction``: the
statements before the first block, that block, and the scratch tensors as leading
parameters). A call allocates the scratch tensors (as ``T.empty`` allocates: torch tensors
on the inputs' device, numpy arrays for host inputs) and launches the kernels in order on
the caller's stream, so each sees what the ones before it wrote. ``T.empty`` outputs
before the first block are allocated the same way and returned as the function says.
Statements between or after the blocks (other than a final ``return``) are refused.
"""
from __future__ import annotations

import re

import ast
import copy
import inspect

from tilejit import syntax
from tilejit import language as T
from tilejit.errors import CompileError
from tilejit.frontend.kernel_macros import launching_call
from tilejit.frontend.rewrite import materialize
from tilejit.frontend.source import (_function_def, function_namespace, is_launch,
                                     resolve_static)
from tilejit.ir.markers import LANGUAGE
from tilejit.runtime import host
from tilejit.runtime.arguments import TensorSpec, as_tensor_arg


def _launch(stmt, namespace) -> bool:
    """A ``with T.Kernel`` block, or the call of a macro that holds one (its kernel is
    compiled from that call: ``frontend/kernel_macros.py`` inlines it)."""
    return isinstance(stmt, ast.With) and any(is_launch(item.context_expr, namespace)
                                              for item in stmt.items) or \
        launching_call(stmt, namespace)


def _scratch(stmt, namespace):
    """The name a prologue statement ``X = T.alloc_global(...)`` / ``T.empty(...)``
    assigns, or None."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(
            stmt.targets[0], ast.Name) and isinstance(stmt.value, ast.Call) and resolve_static(
            stmt.value.func, namespace) in (T.alloc_global, T.empty):
        return stmt.targets[0].id
    return None


def is_sequence(func, source_tree=None) -> bool:
    """Whether the kernel has several launches, or scratch tensors (``T.alloc_global``)."""
    try:
        _filename, fdef = source_tree if source_tree is not None else _function_def(func)
    except CompileError:
        return False        # KernelFunction reports it
    if not isinstance(fdef, ast.FunctionDef):
        return False
    namespace = function_namespace(func)
    launches = sum(_launch(s, namespace) for s in fdef.body)
    return launches > 1 or (launches == 1 and any(
        isinstance(n, ast.Call) and resolve_static(n.func, namespace) is T.alloc_global
        for s in fdef.body if not _launch(s, namespace) for n in syntax.walk(s)))


class KernelSequence:
    """The kernels of a function of several launches, called as one (module docstring)."""

    def __init__(self, func, source_tree=None, **options):
        # the runtime's kernel module imports this one: a circle broken here
        from tilejit.runtime.kernel import KernelFunction
        filename, fdef = source_tree if source_tree is not None else _function_def(func)
        namespace = function_namespace(func)
        body = fdef.body
        launches = [i for i, s in enumerate(body) if _launch(s, namespace)]
        for stmt in body[launches[0]:]:
            if not (_launch(stmt, namespace) or stmt is body[-1] and isinstance(
                    stmt, ast.Return)):
                raise CompileError("a kernel of several `with T.Kernel` blocks may only have "
                                   "the blocks after its first one (and a final `return`): "
                                   "compute host values before the first block",
                                   filename, stmt.lineno)
        prologue = body[:launches[0]]
        self.scratch = [n for n in (_scratch(s, namespace) for s in prologue) if n]
        kept = [s for s in prologue if _scratch(s, namespace) is None]
        for s in kept:
            for node in syntax.walk(s):
                if isinstance(node, ast.Call) and resolve_static(
                        node.func, namespace) is T.alloc_global:
                    raise CompileError("T.alloc_global: assign it to a name before the first "
                                       "`with T.Kernel` block (X = T.alloc_global(shape, "
                                       "dtype))", filename, node.lineno)
        self.func, self.__name__ = func, func.__name__
        self.__doc__, self.__wrapped__ = func.__doc__, func
        self.params = [a.arg for a in fdef.args.args]
        signature = inspect.signature(func).parameters
        self.defaults = {p: signature[p].default for p in self.params if p in signature
                         and signature[p].default is not inspect.Parameter.empty}
        self.stages = []
        for k, i in enumerate(launches):
            sub = copy.deepcopy(fdef)
            sub.body = copy.deepcopy(kept) + [copy.deepcopy(body[i])]
            sub.args.args = [ast.arg(n) for n in self.scratch] + sub.args.args
            sub.args.defaults = []
            self.stages.append(KernelFunction(func, source_tree=(filename, sub),
                                              launch_index=k, **options))
        self._allocate = self._allocator(filename, fdef, prologue, namespace)
        ret = body[-1] if isinstance(body[-1], ast.Return) else None
        self.returns = None
        if ret is not None and ret.value is not None:
            names = ret.value.elts if isinstance(ret.value, ast.Tuple) else [ret.value]
            if not all(isinstance(n, ast.Name) and n.id in self.scratch for n in names):
                raise CompileError("a kernel of several launches returns T.empty outputs "
                                   "by name", filename, ret.lineno)
            self.returns = (tuple(n.id for n in names) if isinstance(ret.value, ast.Tuple)
                            else names[0].id)

    def _allocator(self, filename, fdef, prologue, namespace):
        """The host function that runs the prologue (T.alloc_global allocating as T.empty
        does) and returns the scratch tensors."""
        alloc = copy.deepcopy(fdef)
        alloc.decorator_list, alloc.returns = [], None
        alloc.args.defaults = []
        for a in alloc.args.args:
            a.annotation = None

        class _AsEmpty(syntax.NodeTransformer):
            def visit_Call(self, node):
                node = self.generic_visit(node)
                if resolve_static(node.func, namespace) is T.alloc_global:
                    node.func = ast.Attribute(ast.Name(LANGUAGE, ast.Load()), "empty",
                                              ast.Load())
                    node.keywords = [k for k in node.keywords if k.arg != "scope"]
                return node
        alloc.body = [_AsEmpty().visit(copy.deepcopy(s)) for s in prologue] + [ast.Return(
            ast.Tuple([ast.Name(n, ast.Load()) for n in self.scratch], ast.Load()))]
        alloc.name = f"{fdef.name}__scratch"
        return materialize(self.stages[0].source, alloc, dict(namespace))

    # the attributes TileLang's doors read and adjust, over every stage
    @property
    def source(self):
        return self.stages[0].source

    @property
    def target(self):
        return self.stages[0].target

    @property
    def arch(self):
        return self.stages[0].arch

    @property
    def whole_copies(self):
        return tuple(sorted({p for s in self.stages for p in s.whole_copies}))

    @whole_copies.setter
    def whole_copies(self, value):
        for s in self.stages:
            s.whole_copies = tuple(p for p in s.whole_copies if p in value)

    @property
    def tile_copies(self):
        return frozenset(p for s in self.stages for p in s.tile_copies)

    @property
    def shape_entries(self):
        return [e for s in self.stages for e in s.shape_entries]

    def __repr__(self):
        return f"<tilejit.kernel {self.func.__qualname__}: {len(self.stages)} launches>"

    def _bind(self, args, kwargs) -> list:
        if len(args) > len(self.params):
            raise TypeError(f"{self.__name__}() takes {len(self.params)} argument(s) "
                            f"({', '.join(self.params)}), got {len(args)}")
        values = list(args)
        for name in self.params[len(args):]:
            if name in kwargs:
                values.append(kwargs.pop(name))
            elif name in self.defaults:
                values.append(self.defaults[name])
            else:
                raise TypeError(f"{self.__name__}() missing argument {name!r} "
                                f"(parameters: {', '.join(self.params)})")
        if kwargs:
            raise TypeError(f"{self.__name__}() got an unexpected argument "
                            f"{next(iter(kwargs))!r} (parameters: {', '.join(self.params)})")
        return values

    def scratch_tensors(self, values, on_host=False) -> tuple:
        """The scratch tensors (and T.empty outputs) of a call with ``values``: like its
        first tensor, or (``on_host``: a compile without a device) shapes and dtypes
        only (``TensorSpec``: a bfloat16 one too, which numpy has not)."""
        like = TensorSpec((1,), "float32").as_arg() if on_host else next(
            (t for t in map(_tensor_or_none, values) if t is not None), None)
        with host.allocating_like(like):
            return tuple(self._allocate(*values))

    def __call__(self, *args, **kwargs):
        values = self._bind(args, kwargs)
        scratch = self.scratch_tensors(values)
        for stage in self.stages:
            stage(*scratch, *values)
        if self.returns is None:
            return None
        by_name = dict(zip(self.scratch, scratch))
        if isinstance(self.returns, str):
            return by_name[self.returns]
        return tuple(by_name[n] for n in self.returns)

    def compile(self, *args, target=None, arch=None, **kwargs):
        """Each launch compiled for the arguments' types (``KernelFunction.compile``); the
        handles in order, with ``.ptx`` the modules one after another."""
        values = self._bind(args, kwargs)
        scratch = self.scratch_tensors(values, on_host=True)
        return SequenceHandle([s.compile(*scratch, *values, target=target, arch=arch)
                               for s in self.stages])


class SequenceHandle:
    def __init__(self, handles):
        self.handles = handles

    @property
    def ptx(self) -> str:
        """The launches' PTX as one module that ptxas assembles (TileLang's source holds
        every kernel of a program): ``merged_ptx``."""
        return merged_ptx([h.ptx for h in self.handles])

    def __getattr__(self, name):
        return getattr(self.handles[0], name)


_ENTRY = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\(")
_SYMBOL = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:global|const)\b.*?"
                     r"([A-Za-z_$][\w$]*)\s*(?:\[|=|;)")


def merged_ptx(modules: list[str]) -> str:
    """PTX modules (one kernel each, as the launches of a sequence compile) as one module:
    the highest ``.version`` and the first ``.target``; the second kernel's entry (and its
    parameters) named ``<name>_1`` and so on; a module-level declaration repeated word for
    word kept once (``.extern .shared`` buffers), one of another module's name under a new
    one (``<symbol>_<k>``)."""
    if len(modules) <= 1:
        return "".join(modules)
    versions, target, body = [], None, []
    seen_lines: set = set()
    declared: dict = {}          # symbol -> its declaring line
    for k, ptx in enumerate(modules):
        lines = ptx.splitlines()
        start = next((i + 1 for i, ln in enumerate(lines)
                      if ln.strip().startswith(".address_size")), 0)
        for ln in lines[:start]:
            word = ln.strip()
            if word.startswith(".version"):
                versions.append(tuple(int(x) for x in word.split()[1].split(".")))
            elif word.startswith(".target") and target is None:
                target = word
        text = "\n".join(lines[start:])
        renames = {}
        if k:
            renames.update({name: f"{name}_{k}" for name in _ENTRY.findall(text)})
        depth = 0
        for ln in text.splitlines():
            if depth == 0:
                match = _SYMBOL.match(ln)
                if match and match.group(1) in declared and declared[match.group(1)] != ln:
                    renames[match.group(1)] = f"{match.group(1)}_{k}"
                elif match:
                    declared[match.group(1)] = ln
            depth += ln.count("{") - ln.count("}")
        for old, new in renames.items():
            text = re.sub(rf"(?<![\w$]){re.escape(old)}(?=(_param_\d+)?(?![\w$]))", new, text)
        depth = 0
        for ln in text.splitlines():
            at_top = depth == 0
            depth += ln.count("{") - ln.count("}")
            if at_top and ln.strip().startswith((".extern", ".global", ".const")):
                if ln in seen_lines:
                    continue
                seen_lines.add(ln)
            body.append(ln)
        body.append("")
    version = ".".join(map(str, max(versions))) if versions else "8.0"
    header = [f".version {version}", target or ".target sm_90", ".address_size 64", ""]
    return "\n".join(header + body)


def _tensor_or_none(value):
    try:
        return as_tensor_arg(value)
    except Exception:   # a scalar or a compile-time value: not the tensors' placement
        return None

"""Front end: TileLang's explicit loads and stores (``language/bit_moves.py``) as the
markers the compiler types and lowers, on the device program's tree before its slices
become lanes (``slice_vectors.py``):

- ``T.ldg128(X[i:i + 4], pred=p)`` → ``__tj_bits_load(X, (i,), 4, p, "global")``: the
  operand's first element (a slice's start, 0 for a whole buffer) is the address;
  ``lds*`` the same of a shared tile (``"shared"``, no ``pred``);
- ``T.stg128(Y[j:j + 4], v, pred=p)`` → ``__tj_bits_store(Y, (j,), v, 4, p, "global")``;
- ``T.reinterpret(v, T.float32x4)`` (or TileLang's older order, the dtype first) with a
  vector dtype → ``__tj_bits_as(v, "float32", 4)``.

A name bound to a wide load or a vector reinterpret (``val = T.ldg128(...)``) holds a
tuple; a slice statement whose value holds one (``Y[i:i + 4] = T.reinterpret(...)``) gets
it bound to a name of its own first (``__tj_bits<k>``), evaluated once. Both are the
vectors ``slice_vectors.py`` reads lane by lane: {name: (lanes, dtype name)}. An operand
that is not an element or region of a named buffer, a slice with a step, ``pred=`` on a
shared-memory access, or a wrong argument count is a ``CompileError`` at the line."""
from __future__ import annotations

import ast

from tilejit import syntax
from tilejit import language as T
from tilejit.frontend.source import resolve_static
from tilejit.ir.markers import BITS_AS, BITS_LOAD, BITS_STORE
from tilejit.language.bit_moves import ACCESSES
from tilejit.language.dtypes import DType, as_dtype

_ACCESS_FUNCTIONS = {getattr(T, name): name for name in ACCESSES}


def _vector_dtype(node, namespace):
    """(base dtype name, lanes) of a vector dtype an expression names, else None."""
    value = node.value if isinstance(node, ast.Constant) else resolve_static(node, namespace)
    if isinstance(value, str) and not isinstance(value, DType):
        try:
            value = as_dtype(value)
        except (TypeError, ValueError):
            return None
    if not isinstance(value, DType) or value.lanes <= 1:
        return None
    suffix = f"x{value.lanes}"         # float32x4: float32, 4 lanes
    return (value.name[:-len(suffix)], value.lanes) if value.name.endswith(suffix) else None


class _Moves(syntax.NodeTransformer):
    def __init__(self, namespace, error):
        self.namespace = namespace
        self.error = error
        self.vectors = {}       # {name: (lanes, dtype name)} of the tuple-valued names
        self.count = 0

    def _access(self, node):
        """The access name (``"ldg128"``) a call makes, else None."""
        if not isinstance(node, ast.Call):
            return None
        return _ACCESS_FUNCTIONS.get(resolve_static(node.func, self.namespace))

    def _arguments(self, node, name, params):
        args = list(node.args)
        for k in node.keywords:
            pos = params.index(k.arg) if k.arg in params else None
            if pos is None or pos < len(args) and args[pos] is not None:
                raise self.error(f"T.{name}({', '.join(params)}): unexpected argument "
                                 f"{k.arg!r}", node)
            args += [None] * (pos + 1 - len(args))
            args[pos] = k.value
        required = len(params) - 1
        if len(args) > len(params) or len(args) < required or None in args[:required]:
            raise self.error(f"T.{name} takes {', '.join(params[:required])} (and pred=), "
                             f"got `{ast.unparse(node)}`", node)
        args += [None] * (len(params) - len(args))
        if args[-1] is not None and ACCESSES[name][1] == "shared":
            raise self.error(f"T.{name}: a shared-memory access takes no pred= (TileLang's "
                             f"lds/sts have none)", node)
        if args[-1] is None:
            args[-1] = ast.Constant(True)
        return args

    def _address(self, operand, name, node):
        """(buffer name, index tuple) of an access's operand."""
        if isinstance(operand, ast.Name):
            return ast.Name(operand.id, ast.Load()), ast.Tuple([], ast.Load())
        if not (isinstance(operand, ast.Subscript) and isinstance(operand.value, ast.Name)):
            raise self.error(f"T.{name}: the operand is an element or a region of a "
                             f"{ACCESSES[name][1]} buffer (X[i], X[i:i + n]), got "
                             f"`{ast.unparse(operand)}`", node)
        elts = operand.slice.elts if isinstance(operand.slice, ast.Tuple) else [operand.slice]
        index = []
        for e in elts:
            if isinstance(e, ast.Slice):
                if e.step is not None:
                    raise self.error(f"T.{name}: a region with a step (`{ast.unparse(operand)}"
                                     f"`) has no one address", node)
                e = e.lower if e.lower is not None else ast.Constant(0)
            index.append(e)
        return ast.Name(operand.value.id, ast.Load()), ast.Tuple(index, ast.Load())

    def visit_Call(self, node):
        node = self.generic_visit(node)
        name = self._access(node)
        if name is not None and ACCESSES[name][2]:
            bits, memory, _ = ACCESSES[name]
            src, pred = self._arguments(node, name, ["src", "pred"])
            buffer, index = self._address(src, name, node)
            return ast.copy_location(ast.Call(ast.Name(BITS_LOAD, ast.Load()), [
                buffer, index, ast.Constant(bits // 32), pred, ast.Constant(memory)], []), node)
        if resolve_static(node.func, self.namespace) is T.reinterpret and \
                len(node.args) == 2 and not node.keywords:
            for value, dtype in (node.args, node.args[::-1]):
                vector = _vector_dtype(dtype, self.namespace)
                if vector is not None:
                    return ast.copy_location(ast.Call(ast.Name(BITS_AS, ast.Load()), [
                        value, ast.Constant(vector[0]), ast.Constant(vector[1])], []), node)
        return node

    def visit_Expr(self, node):
        name = self._access(node.value)
        if name is None or ACCESSES[name][2]:
            return self.generic_visit(node)
        bits, memory, _ = ACCESSES[name]
        call = self.generic_visit(node.value)
        dst, value, pred = self._arguments(call, name, ["dst", "value", "pred"])
        buffer, index = self._address(dst, name, node)
        return ast.copy_location(ast.Expr(ast.Call(ast.Name(BITS_STORE, ast.Load()), [
            buffer, index, value, ast.Constant(bits // 32), pred, ast.Constant(memory)],
            [])), node)

    def visit_Assign(self, node):
        node = self.generic_visit(node)
        target = node.targets[0] if len(node.targets) == 1 else None
        if isinstance(target, ast.Subscript):
            return self._hoisted(node)
        vector = self._vector_of(node.value)
        if vector is None:
            return node
        if isinstance(target, ast.Name):
            self.vectors[target.id] = vector
            return node
        return node

    def _hoisted(self, node):
        """``Y[i:i + 4] = T.reinterpret(T.ldg128(...), T.float32x4) * 2``: each tuple the
        value makes, bound to a name of its own first (evaluated once), then read by name."""
        binds = []
        outer = self

        class Tuples(syntax.NodeTransformer):
            def visit_Call(self, call):
                call = self.generic_visit(call)
                vector = outer._vector_of(call)
                if vector is None:
                    return call
                fresh = f"__tj_bits{outer.count}"
                outer.count += 1
                outer.vectors[fresh] = vector
                binds.append(syntax.fix_missing_locations(ast.copy_location(
                    ast.Assign([ast.Name(fresh, ast.Store())], call), node)))
                return ast.copy_location(ast.Name(fresh, ast.Load()), call)

        node.value = Tuples().visit(node.value)
        return binds + [node]

    @staticmethod
    def _vector_of(value):
        """(lanes, dtype name) of a tuple-valued marker call, else None."""
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
            return None
        if value.func.id == BITS_LOAD and isinstance(value.args[2], ast.Constant) and \
                value.args[2].value > 1:
            return value.args[2].value, "uint32"
        if value.func.id == BITS_AS:
            return value.args[2].value, value.args[1].value
        return None


def rewrite_bit_moves(fdef: ast.FunctionDef, ks) -> tuple[ast.FunctionDef, dict]:
    """``fdef`` with the kernel body's explicit loads and stores as markers, and the
    tuple-valued names ({name: (lanes, dtype name)})."""
    launch = fdef.body[ks.launch_index] if 0 <= ks.launch_index < len(fdef.body) else None
    if launch is None or not any(
            isinstance(n, ast.Call) and (resolve_static(n.func, ks.namespace) in
                                         (T.reinterpret, *_ACCESS_FUNCTIONS))
            for n in syntax.walk(launch)):
        return fdef, {}
    moves = _Moves(ks.namespace, ks.error)
    fdef.body[ks.launch_index] = moves.visit(launch)
    return fdef, moves.vectors


__all__ = ["rewrite_bit_moves"]

"""What every source pass receives besides the program: the kernel's namespace (globals,
closure, constexpr values, specialized shape entries), the block size, the dtypes of
the tensor parameters, and the tile plan the passes fill in."""
from __future__ import annotations

import ast
import linecache
from dataclasses import dataclass, field

from tilejit.frontend.tile_operands import region_source
from tilejit.errors import CompileError, LayoutCompileError
from tilejit.ir.plan import TilePlan
from tilejit.options import CompileOptions
from tilejit.target import SIM, Target


@dataclass
class PassContext:
    namespace: dict
    filename: str = "<kernel>"
    threads: int = 128
    param_dtypes: dict = field(default_factory=dict)
    plan: TilePlan = field(default_factory=TilePlan)
    target: Target = SIM
    options: CompileOptions = CompileOptions()
    params: dict = field(default_factory=dict)      # tensor name -> GlobalTensorType
    pipelines: list = field(default_factory=list)   # pipeline.Pipeline per pipelined loop
    counters: dict = field(default_factory=dict)    # kind -> last number given (number())
    # names the passes made, as errors should show them (a split view: split_indices.py)
    shown_names: dict = field(default_factory=dict)
    # T.annotate_safe_value: tensor name -> (value expression, line) (safe_values.py)
    safe_values: dict = field(default_factory=dict)

    def number(self, kind: str) -> int:
        """The next number (1, 2, …) of generated names of this ``kind``, counted per
        compilation: the same kernel gets the same names whatever was compiled before."""
        self.counters[kind] = self.counters.get(kind, 0) + 1
        return self.counters[kind]

    def error(self, message: str, node: ast.AST | int | None) -> CompileError:
        line = node if isinstance(node, int) or node is None else getattr(node, "lineno", None)
        return CompileError(self._shown(message), self.filename, line)

    def layout_error(self, message: str, node) -> CompileError:
        """A CompileError that is also a ValueError: a layout the tile cannot have is a
        bad value (TileLang raises ValueError for it)."""
        line = node if isinstance(node, int) or node is None else getattr(node, "lineno", None)
        return LayoutCompileError(self._shown(message), self.filename, line)

    def _shown(self, message: str) -> str:
        for made, shown in self.shown_names.items():
            message = message.replace(made, shown)
        return region_source(message)

    def source_line(self, line: int | None) -> str:
        if not line:
            return ""
        return linecache.getline(self.filename, line).strip()

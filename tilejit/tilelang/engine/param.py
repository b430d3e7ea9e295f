"""TileLang's ``tilelang.engine.param.KernelParam``: one parameter of a compiled kernel,
its dtype and shape, as ``kernel.params`` lists them (in the kernel's parameter order,
outputs included; TileLang's test harnesses make their inputs from them).

``dtype`` is tilejit's dtype, a ``str`` (``p.dtype == "float16"``, as TileLang's newer
dtypes compare); ``shape`` holds ints, and a symbol's name where the extent is known
only at run time (TileLang holds the TVM variable there); a scalar parameter's shape is
``[]``."""
from __future__ import annotations

from dataclasses import dataclass

from tilejit.language.compat import NotSupportedError
from tilejit.language.dtypes import DType, as_dtype


@dataclass
class KernelParam:
    dtype: DType
    shape: list

    def __post_init__(self):
        self.dtype = as_dtype(self.dtype)
        self.shape = list(self.shape)

    @classmethod
    def from_buffer(cls, buffer):
        raise NotSupportedError("KernelParam.from_buffer (tilelang.engine.param) is not "
                                "supported by tilejit: it reads a TVM Buffer (tilejit is "
                                "built without TVM); kernel.params lists the parameters")

    @classmethod
    def from_var(cls, var):
        raise NotSupportedError("KernelParam.from_var (tilelang.engine.param) is not "
                                "supported by tilejit: it reads a TVM Var (tilejit is built "
                                "without TVM); kernel.params lists the parameters")

    def is_scalar(self) -> bool:
        return len(self.shape) == 0

    def is_unsigned(self) -> bool:
        return self.dtype.name.startswith("uint")

    def is_float8(self) -> bool:
        return self.dtype.name.startswith("float8")

    def is_float4(self) -> bool:
        return self.dtype.name.startswith("float4")

    def is_boolean(self) -> bool:
        return self.dtype.name == "bool"

    def torch_dtype(self):
        """The matching ``torch.dtype``."""
        return self.dtype.as_torch()

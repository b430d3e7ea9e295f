"""Every example kernel CI compiles to PTX and assembles: (module, kernel, arguments,
constexprs, instructions its PTX must contain)."""
import importlib
import os
import sys

import numpy as np

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
MODULES = ["vector_add", "elementwise_2d"]


def example_arguments(specs):
    out = []
    for spec in specs:
        if isinstance(spec, tuple):
            shape, dtype = spec
            out.append(np.zeros(shape, dtype=dtype))
        else:
            out.append(spec)
    return out


def all_examples():
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    for name in MODULES:
        module = importlib.import_module(name)
        for entry in module.PTX_EXAMPLES:
            kernel, specs, constexprs = entry[:3]
            must = entry[3] if len(entry) > 3 else ()
            yield f"{name}.{kernel.__name__}", kernel, specs, constexprs, must

"""``tvm.target.Target`` as TileLang's programs use it: a target named by a string
(``"cuda -arch=sm_80"``, ``"c"``, ``"llvm"``) or a dict, entered as a context
(``with tvm.target.Target("c"): kernel = tilelang.compile(...)``) so that a compile whose
target is ``"auto"`` takes it, and passed where a target is (``target=Target("cuda")``).

tilejit runs a program where its tensors live: TileLang's CPU targets (``"c"``,
``"llvm"``) run it in the simulator on host tensors, as ``"auto"`` does; ``"cuda"`` on
the GPU, with the arch the target names."""
from __future__ import annotations

import threading
import types

_CURRENT = threading.local()


def _stack() -> list:
    if not hasattr(_CURRENT, "targets"):
        _CURRENT.targets = []
    return _CURRENT.targets


class Target:
    """A target's kind (``target.kind.name``), its arch where it names one
    (``target.arch``), and the text it was made from (``str(target)``)."""

    def __init__(self, target, host=None):
        if isinstance(target, Target):
            target = target.text
        if isinstance(target, dict):
            if not isinstance(target.get("kind"), str):
                raise ValueError(f"tvm.target.Target: a dict target needs a \"kind\" string, "
                                 f"got {target!r}")
            text = target["kind"] + (f" -arch={target['arch']}" if target.get("arch") else "")
        elif isinstance(target, str) and target.split():
            text = " ".join(target.split())
            if "/" not in text.split()[0]:      # (a TVM tag: "nvidia/nvidia-h100")
                try:
                    target_options(text)
                except ValueError as e:
                    raise ValueError(f"tvm.target.Target: {e}") from None
        else:
            raise ValueError(f"tvm.target.Target: expected a target string (\"cuda\", "
                             f"\"cuda -arch=sm_90a\", \"c\", \"llvm\") or a dict, got "
                             f"{target!r}")
        self.text = text
        self.host = None if host is None else Target(host)
        words = text.split()
        self.kind = types.SimpleNamespace(name=words[0])
        self.arch = arch_option(words)

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        return False

    @staticmethod
    def current(allow_none=True):
        """The innermost target entered as a context on this thread; None (or, with
        ``allow_none=False``, a ValueError) outside every one."""
        stack = _stack()
        if stack:
            return stack[-1]
        if not allow_none:
            raise ValueError("tvm.target.Target.current(): no target is entered (use `with "
                             "tvm.target.Target(...)`)")
        return None

    def export(self) -> dict:
        return {"kind": self.kind.name, **({"arch": self.arch} if self.arch else {})}

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"Target({self.text!r})"

    def __eq__(self, other):
        return isinstance(other, Target) and other.text == self.text

    def __hash__(self):
        return hash(self.text)


# TileLang's target kinds (``tilelang.utils.target``); "sim" is tilejit's simulator
KINDS = ("auto", "cuda", "hip", "rocm", "metal", "llvm", "c", "webgpu", "cutedsl", "sim")

# The options a target string may give after its kind, as TVM's target kinds register them
# (src/target/target_kind.cc: the attributes of every kind, then each kind's own): a key
# no kind has, or one without its value, was skipped, so that `cuda --arch=sm_80` or
# `cuda arch=sm_80` compiled for the default arch. tilejit reads -arch (the CUDA arch);
# the others describe the device, which tilejit asks the driver about, and are taken as
# TileLang's programs may write them (`hip -mcpu=gfx950`). {key: "int", "bool" or "str"}
_COMMON_OPTIONS = {"keys": "str", "libs": "str", "device": "str", "model": "str",
                   "tag": "str", "host": "str", "from_device": "int",
                   "target_device_type": "int"}
_GPU_LIMITS = {"max_num_threads": "int", "max_threads_per_block": "int",
               "max_shared_memory_per_block": "int", "thread_warp_size": "int"}
# (TVM's cuda kind has -mcpu too, which its CUDA code generation does not read: `cuda
# -mcpu=sm_80` meant as the arch is refused, its message naming -arch)
_CUDA_OPTIONS = {"arch": "str", "registers_per_block": "int",
                 "l2_cache_size_bytes": "int", **_GPU_LIMITS}
_ROCM_OPTIONS = {"mcpu": "str", "mtriple": "str", "mattr": "str", **_GPU_LIMITS}
_LLVM_OPTIONS = {"mattr": "str", "mcpu": "str", "mtriple": "str", "mfloat-abi": "str",
                 "mabi": "str", "num-cores": "int", "opt-level": "int", "cl-opt": "str",
                 "jit": "str", "vector-width": "int", "fast-math": "bool",
                 **{f"fast-math-{f}": "bool" for f in ("nnan", "ninf", "nsz", "arcp",
                                                       "contract", "reassoc")}}
_OPTIONS = {
    "cuda": _CUDA_OPTIONS, "auto": _CUDA_OPTIONS, "sim": _CUDA_OPTIONS,
    "cutedsl": _CUDA_OPTIONS, "hip": _ROCM_OPTIONS, "rocm": _ROCM_OPTIONS,
    "llvm": _LLVM_OPTIONS,
    "c": {"mcpu": "str", "march": "str", "workspace-byte-alignment": "int",
          "constants-byte-alignment": "int"},
    "metal": {"max_function_args": "int", **_GPU_LIMITS},
    "webgpu": {"max_num_threads": "int"},
}


def arch_option(words) -> str | None:
    """The ``-arch`` of a target string's words (``-arch=sm_90a``, ``-arch sm_90a``, with
    any number of leading dashes, as TVM strips them), or None."""
    arch = None
    for i, word in enumerate(words[1:], 1):
        key, eq, value = word.lstrip("-").partition("=")
        if not word.startswith("-") or key != "arch":
            continue
        if eq:
            arch = value
        elif i + 1 < len(words):
            arch = words[i + 1]
    return arch


def target_options(text: str) -> dict:
    """The options of a target string (``"cuda -arch=sm_90a"``): {key: value}, each
    written ``-key=value`` or ``-key value`` (a bool one also ``-key`` alone), its key one
    the kind has; a ValueError naming the first option that is not."""
    words = text.split()
    kind, rest = words[0], words[1:]
    known = {**_COMMON_OPTIONS, **_OPTIONS.get(kind, {})}
    example = "-arch=sm_90a" if "arch" in known else "-mcpu=gfx950" if "mcpu" in known \
        else "-key=value"
    options = {}
    i = 0
    while i < len(rest):
        word = rest[i]
        i += 1
        if not word.startswith("-") or not word.lstrip("-") or word.lstrip("-")[0] == "=":
            raise ValueError(f"the option {word!r} of the {kind} target {text!r} is not "
                             f"-key=value (such as {example})")
        # (any number of leading dashes, as TVM's target parser strips them: --arch=sm_90)
        key, eq, value = word.lstrip("-").partition("=")
        if key not in known:
            hint = " (the CUDA arch is -arch=sm_XX)" if "arch" in known else ""
            raise ValueError(f"the {kind} target {text!r} has no option {word!r}{hint}; its "
                             f"options are -{', -'.join(sorted(known))}")
        kind_of = known[key]
        if not eq and i < len(rest) and not rest[i].startswith("-"):
            value = rest[i]             # `-arch sm_86`, as TVM reads it
            i += 1
        elif not eq and kind_of == "bool":
            value = "true"
        if not value:
            raise ValueError(f"the option {word!r} of the {kind} target {text!r} has no "
                             f"value: -{key}=<{kind_of}>" + (
                                 f" (such as {example})" if key in example else ""))
        if kind_of in ("int", "bool") and not (
                value.lower() in ("true", "false") or value.lstrip("+-").isdigit()):
            raise ValueError(f"the option {word!r} of the {kind} target {text!r}: "
                             f"-{key} takes an {'integer' if kind_of == 'int' else 'bool'}, "
                             f"got {value!r}")
        options[key] = value
    return options


def check_target(target, who: str) -> None:
    """A TypeError / ValueError naming ``who``'s ``target`` when it is not a target
    TileLang takes: None, a string or dict whose kind is one of ``KINDS`` (a TVM tag such
    as ``"nvidia/nvidia-h100"`` too), or a ``Target``."""
    if target is None or isinstance(target, Target) or \
            type(target).__module__ == "tilejit.target":      # tilejit's own Target
        return
    if isinstance(target, dict):
        kind = target.get("kind")
    elif isinstance(target, str):
        words = target.split()
        kind = words[0] if words else None
        if kind is not None and "/" in kind:
            return                      # a TVM target tag ("nvidia/geforce-rtx-4090")
    else:
        raise TypeError(f"{who} target: expected a string such as \"cuda\" or \"cuda "
                        f"-arch=sm_90a\", a dict or a tvm.target.Target, got "
                        f"{type(target).__name__} {target!r}")
    if kind not in KINDS:
        raise ValueError(f"{who} target: expected one of {', '.join(KINDS)} (with options "
                         f"such as -arch=sm_90a), got {target!r}")
    try:
        if isinstance(target, str):
            target_options(target)
        else:
            _check_dict_options(target)
    except ValueError as e:
        raise ValueError(f"{who} target: {e}") from None


def _check_dict_options(target: dict) -> None:
    """A dict target's keys besides "kind" are its options (``{"kind": "cuda", "arch":
    "sm_80"}``): one the kind does not have is refused as in a string."""
    known = {**_COMMON_OPTIONS, **_OPTIONS.get(target["kind"], {})}
    for key in target:
        if key != "kind" and key not in known:
            raise ValueError(f"the {target['kind']} target {target!r} has no option "
                             f"{key!r}; its options are {', '.join(sorted(known))}")


# TileLang's execution backends (``tilelang.jit``'s ``execution_backend``: its current
# ones, and "dlpack" and "ctypes" of its earlier releases). tilejit launches its PTX
# itself and uses none, but a name TileLang has not (a misspelling) was taken silently
EXECUTION_BACKENDS = ("auto", "tvm_ffi", "cython", "nvrtc", "torch", "cutedsl", "dlpack",
                      "ctypes")


def check_execution_backend(backend, who: str) -> None:
    """A TypeError / ValueError naming ``who``'s ``execution_backend`` when it is not
    None or one of ``EXECUTION_BACKENDS``."""
    if backend is None:
        return
    if not isinstance(backend, str):
        raise TypeError(f"{who} execution_backend: expected one of "
                        f"{', '.join(map(repr, EXECUTION_BACKENDS))} or None, got "
                        f"{type(backend).__name__} {backend!r:.80}")
    if backend not in EXECUTION_BACKENDS:
        raise ValueError(f"{who} execution_backend: expected one of "
                         f"{', '.join(map(repr, EXECUTION_BACKENDS))} or None, got "
                         f"{backend!r:.80}")

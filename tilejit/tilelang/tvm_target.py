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
        else:
            raise ValueError(f"tvm.target.Target: expected a target string (\"cuda\", "
                             f"\"cuda -arch=sm_90a\", \"c\", \"llvm\") or a dict, got "
                             f"{target!r}")
        self.text = text
        self.host = None if host is None else Target(host)
        words = text.split()
        self.kind = types.SimpleNamespace(name=words[0])
        self.arch = None
        for i, word in enumerate(words[1:], 1):
            if word.startswith("-arch="):
                self.arch = word[len("-arch="):]
            elif word == "-arch" and i + 1 < len(words):
                self.arch = words[i + 1]

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

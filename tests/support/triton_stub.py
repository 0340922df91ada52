"""A stand-in for ``triton`` while the framework tests import torchtitan and Megatron-LM on CPU.

torchtitan 0.3.0 (``distributed/minimal_async_ep/kernels.py``, ``overrides/fused_*.py``) and
Megatron-LM's training package import triton at module load to define GPU kernels, without
declaring it as a dependency; the CPU wheel of torch does not bring it, and the real package is
about 1 GB installed. The kernels are never called when a config is parsed or a model is built on
the meta device, so a module whose every attribute is a no-op decorator lets the imports finish.
Where triton is installed, it is used as is.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# torch modules that try `import triton` when loaded; loaded first, they see it missing.
TORCH_PROBES = ("torch._inductor.runtime.triton_compat", "torch._functorch.partitioners", "torch._inductor.codecache")


class _Anything:
    """Every attribute and every call gives another one: decorators, types and constants alike."""

    def __getattr__(self, name: str) -> _Anything:
        return _Anything()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # @triton.jit on a function
        return _Anything()

    def __getitem__(self, key: Any) -> _Anything:
        return _Anything()


def _module(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__getattr__ = lambda attr: _Anything()  # type: ignore[method-assign]
    mod.__path__ = []  # a package, so submodule imports resolve through sys.modules
    mod.__file__ = f"<stand-in for {name}>"
    mod.__version__ = "0.0.0"  # type: ignore[attr-defined]
    return mod


@contextmanager
def triton_if_missing() -> Iterator[None]:
    """Install the stand-in for the duration, when triton itself is not installed."""
    if importlib.util.find_spec("triton") is not None:
        yield
        return
    from torch.utils import _triton

    _triton.has_triton_package()  # torch caches "no triton" before the stand-in appears
    _triton.has_triton()
    for name in TORCH_PROBES:  # and these torch modules look for it once, at import
        importlib.import_module(name)
    names = ("triton", "triton.language", "triton.runtime", "triton.language.extra")
    saved = {n: sys.modules.get(n) for n in names}
    for n in names:
        sys.modules[n] = _module(n)
    try:
        yield
    finally:
        for n, m in saved.items():
            if m is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = m

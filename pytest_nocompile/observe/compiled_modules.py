"""The module whose method dynamo is compiling, read from dynamo's frame, and the user's line that
compiled it.

dynamo's ``torch._dynamo.convert_frame._compile(code, globals, locals, ...)``
(every torch from 2.4 to 2.15, read in their sources; :func:`.user_code.compiling_code` finds its
frame) holds the code it compiles and that frame's locals. Two shapes name a module:

- dynamo's own wrapper, ``inner`` in ``torch/_dynamo/external_utils.py``
  (``wrap_inline``), which ``torch.compile(module)`` compiles where the
  module's ``forward`` is torch's (``nn.Sequential``, a block of torch's,
  sharded with FSDP2 or not). Its local ``fn`` is the module, or a bound
  method of it (torch 2.15 wraps ``module.compile()``'s ``_call_impl`` so);
- a method of the module itself (a user's ``forward``, compiled whole or
  reached from compiled code), whose first argument is the module.

Where the user compiled a module (``torch.compile(module)``, ``module.compile()``,
``torch.compile(module.method)``) is remembered while the capture is armed:
:func:`remember_compile_sites` wraps dynamo's ``_TorchDynamoContext.__call__``,
which each of these calls with the module, or with a bound method of it
(``module.compile()`` hands it ``module._call_impl``). A module compiled while
no test was watched has no such line; reports then name its method's own place.
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import weakref
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any, Callable, Optional

from .user_code import compiling_code, find_user_code

if TYPE_CHECKING:
    from ..vocabulary.events import CodeLocation
    from ..vocabulary.module_names import CompiledModule
    from .patches import Patches

_WRAPPER_FILE = os.path.join("_dynamo", "external_utils.py")
_WRAPPER = "inner"
# Classes that wrap a module of the user's without being what the user wrote: FSDP2's FSDP<Name>
# subclasses and FSDPModule, and OptimizedModule.
_WRAPPING_PACKAGES = ("torch.distributed.", "torch._dynamo.")
# A bound method of these compiles the module's call, which runs its forward (module.compile()
# passes _call_impl).
_CALLS = ("__call__", "_call_impl", "_wrapped_call_impl")
_MODULE_BASE = "torch.nn.modules.module"  # nn.Module's

# module -> {method name: (file, line) of the user's call that compiled it};
# weak: a test's model dies with it.
_SITES: weakref.WeakKeyDictionary[Any, dict[str, tuple[str, int]]] = weakref.WeakKeyDictionary()


def compiling(frame: Optional[FrameType]) -> tuple[Optional[CodeLocation],
                                                   Optional[CompiledModule]]:
    """The function dynamo is compiling (:func:`.user_code.compiling_code`) and the module whose
    method it is, where it is one; found from ``frame`` outwards, (None, None) outside a compile."""
    code, arguments = compiling_code(frame)  # arguments: _compile's (code, globals, locals, ...)
    if code is None:
        return None, None
    from ..vocabulary.events import CodeLocation

    # The frame's locals: _compile's third argument; its frame argument's, should a torch pass only
    # that.
    frame_locals = (arguments.get("locals") or getattr(arguments.get("frame"), "f_locals", None)
                    or {})
    return (CodeLocation(code.co_filename, code.co_firstlineno, code.co_name),
            module_compiled(code, frame_locals))


def module_compiled(code: CodeType, frame_locals: Any) -> Optional[CompiledModule]:
    """The module whose method ``code`` is (or that dynamo's wrapper calls), with where it was
    compiled; None for other code."""
    try:
        from torch.nn import Module

        from ..vocabulary.module_names import CompiledModule

        wrapped = code.co_name == _WRAPPER and code.co_filename.endswith(_WRAPPER_FILE)
        if wrapped:
            module, method = _module_and_method(frame_locals.get("fn"))
        elif code.co_argcount:
            module, method = frame_locals.get(code.co_varnames[0]), code.co_name
        else:
            return None
        if not isinstance(module, Module):
            return None
        attribute = getattr(type(module), method, None)
        function = (getattr(inspect.unwrap(attribute), "__code__", None) if callable(attribute)
                    else None)
        if not isinstance(function, CodeType) or not (wrapped or function is code):
            return None
        start = function.co_argcount
        return CompiledModule(_class_name(type(module)), method, function.co_filename,
                              function.co_firstlineno, function.co_varnames[1:start],
                              function.co_varnames[start:start + function.co_kwonlyargcount],
                              wrapped, _SITES.get(module, {}).get(method))
    # an unusual object or a moved internal: the module's name is a nicety, the count is not
    except Exception:
        return None


def compiled_name(target: Any) -> Optional[str]:
    """What ``target`` (``torch.compile``'s result or its argument) compiles, named as reports name
    a module's method: ``TinyLM.forward`` for a module (``OptimizedModule`` taken off) or a bound
    method of one; None for other code."""
    from ..vocabulary.module_names import method_name

    try:
        target = getattr(target, "_orig_mod", target)  # torch.compile(module): an OptimizedModule
        if not hasattr(target, "__self__"):  # torch.compile(module.method): wraps the bound method
            target = getattr(target, "__wrapped__", target)
        module, method = _module_and_method(target)
        return None if module is None else method_name(_class_name(type(module)), method)
    except Exception:  # an unusual object: the name is a nicety
        return None


def _class_name(cls: type) -> str:
    """The class the user wrote: the first of the module's classes that is not a wrapper's (the
    module's own class where every one before ``nn.Module`` is torch.distributed's, as a checkpoint
    wrapper's are)."""
    for klass in cls.__mro__:
        if not klass.__module__.startswith(_WRAPPING_PACKAGES):
            return cls.__name__ if klass.__module__ == _MODULE_BASE else klass.__name__
    return cls.__name__


def remember_compile_sites(patches: Patches) -> None:
    """Wrap dynamo's ``_TorchDynamoContext.__call__`` to remember where user code compiles a module,
    among the capture's ``patches`` (put back when it disarms); nothing where this torch has no
    such class (nothing is then remembered)."""
    context = getattr(sys.modules.get("torch._dynamo.eval_frame"), "_TorchDynamoContext", None)
    if context is not None and not patches.is_ours(vars(context).get("__call__")):
        patches.wrap(context, "__call__", _remembering)


def _remembering(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def __call__(self: Any, fn: Any, *args: Any, **kwargs: Any) -> Any:
        compiled = original(self, fn, *args, **kwargs)
        try:
            module, method = _module_and_method(fn)
            site = None if module is None else find_user_code(sys._getframe(1))
            if site is not None:
                _SITES.setdefault(module, {})[method] = (site.filename, site.line)
        except Exception:  # never the user's compile's problem
            pass
        return compiled

    return __call__


def _module_and_method(target: Any) -> tuple[Any, str]:
    """The module and the method that compiling ``target`` compiles: a module's forward, a bound
    method of a module (its call, ``module.compile()``'s ``_call_impl``, runs the forward), else
    (None, "")."""
    from torch.nn import Module

    if isinstance(target, Module):
        return target, "forward"
    module, method = getattr(target, "__self__", None), getattr(target, "__name__", "")
    if not isinstance(module, Module):
        return None, ""
    return module, "forward" if method in _CALLS else method

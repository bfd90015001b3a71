"""Stand-ins for SGLang's heavy native imports, so its real parser-building code runs anywhere.

SGLang builds its command line from msgspec field declarations (``srt/arg_groups/fields/*``) and
``ServerArgs.add_cli_args`` (``srt/server_args.py``). Those are pure Python, but importing them
runs ``sglang/__init__.py`` and ``sglang.srt.utils.common``, which import PyTorch, Triton, NumPy,
ZeroMQ and a few serving libraries at module level. None of those decide an option string, a
type, a choice, a default or an nargs; they are used when a server runs. So this module answers
``import torch`` (and the others below) with a permissive stand-in, and nothing else.

Why each stand-in is safe for argument definitions is written beside it in ``HEAVY``. The
generator (``tui.sglang.flagtable.generate``) also refuses a table in which any recorded value
came from a stand-in (``is_stub``), so a stand-in can never leak into the shipped table.

Installing the finder is process-wide and irreversible: only the generator's own interpreter
calls ``install`` (``python -m tui.sglang.flagtable.generate``); importing this module does not.
"""

from __future__ import annotations

import abc
import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

HEAVY: dict[str, str] = {
    "torch": "PyTorch (GBs, CUDA). Platform detection at import asks torch.cuda; the generator "
    "sets SGLANG_USE_CPU_ENGINE=1 so SGLang picks its CPU platform before asking. Field types "
    "are str/int/float/bool/list annotations, never torch types",
    "triton": "GPU kernel compiler; kernels are decorated at import, never compiled or run here",
    "numpy": "array library used by kernels and samplers at run time, no field is an array",
    "zmq": "pyzmq, the inter-process transport of a running server (srt/utils/network.py)",
    "PIL": "Pillow, image decoding for multimodal requests",
    "pybase64": "base64 speed-up for request payloads",
    "pydantic": "request and response models of the HTTP API (sglang/utils.py, srt/entrypoints)",
    "pydantic_core": "conversions of a running server's msgspec records (utils/msgspec_utils.py)",
    "huggingface_hub": "model downloads; launch_server only routes its logger at import",
    "tqdm": "progress bars of the front-end language (sglang/lang)",
    "IPython": "notebook display helpers of the front-end language",
    "aiohttp": "HTTP client of the front-end language's runtime endpoint",
    # Imported by the parser's path of older releases only (0.5.17 to 0.5.20 import them from
    # server_args.py through srt/utils/common.py, the model configs and the function-call parsers).
    "torchvision": "image decoding for multimodal requests (srt/utils/common.py: decode_jpeg)",
    "safetensors": "the weight-file reader (srt/connector/serde), used when weights load",
    "openai": "the OpenAI client's types behind the OpenAI-compatible request models",
    "partial_json_parser": "streaming tool-call parsing of a response (srt/function_call)",
    "xgrammar": "the grammar backend: grammars compile per request, never at import",
    "sentencepiece": "a tokenizer library some model configs import (srt/configs/internvl.py)",
}
"""Top-level modules answered by stand-ins, and why each cannot shape an argument definition."""

OPTIONAL: dict[str, str] = {
    "transformers": "Hugging Face model configs. 0.5.17 and 0.5.18 import every model config "
    "class from server_args.py (srt/configs/__init__.py); their fields are never flags. Only for "
    "the releases that name it (reference.RELEASES): from 0.5.22 on, SGLang patches transformers "
    "at import whenever it imports (srt/utils/hf_transformers_patches.py), and reads attributes "
    "a stand-in does not have, so there it must stay absent, as it is in the test environment",
}
"""Stand-ins a release asks for by name (``Release.stubs``), with why each is safe."""

VERSIONS: dict[str, dict[str, object]] = {
    # SGLang 0.5.23 pins torch==2.14.1 and compares versions at import (srt/utils/common.py).
    "torch": {"__version__": "2.14.1"},
    "triton": {"__version__": "3.6.0"},
    "numpy": {"__version__": "2.3.0"},
}
"""Attributes a stand-in must really have, because SGLang parses them at import."""

ABSENT: dict[str, frozenset[str]] = {
    # SGLang probes device backends with hasattr(torch, "npu") and raises when the attribute
    # exists without a device: the stand-in is a CPU-only PyTorch, which has neither.
    "torch": frozenset({"npu", "hpu"}),
    # 0.5.17's fla kernels ask Triton for its active driver at import and fall back to the CPU
    # when asking raises (kernels/ops/attention/fla/utils.py): no GPU, so no driver.
    "triton.runtime.driver": frozenset({"active"}),
}
"""Attributes a stand-in must not have (``hasattr`` is the question SGLang asks)."""


class _StubMeta(abc.ABCMeta):
    """Metaclass of stand-in classes: any attribute, operator or conversion answers inertly.

    An ABCMeta, so SGLang's ``class X(nn.Module, ABC)`` finds no metaclass conflict.
    """

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _StubMeta(name, (_StubBase,), {"__module__": cls.__module__})

    def __getitem__(cls, key: object) -> Any:
        return cls

    def __setitem__(cls, key: object, value: object) -> None:
        # CONFIG_MAPPING._extra_content["name"] = Config (0.5.17's model configs).
        pass

    def register(cls, *args: object, **kwargs: object) -> Any:
        # AutoConfig.register("name", Config) and AutoProcessor.register(Config, Processor) in
        # the model configs (0.5.17): a registry call, not ABCMeta's virtual-subclass one.
        return args[-1] if args else cls

    def __or__(cls, other: object) -> Any:
        return cls

    __ror__ = __or__

    def __int__(cls) -> int:
        return 0

    __index__ = __int__

    def __float__(cls) -> float:
        return 0.0

    def __iter__(cls) -> Iterator[Any]:
        return iter(())

    def __len__(cls) -> int:
        return 0

    def __bool__(cls) -> bool:
        return False

    def __mul__(cls, other: object) -> Any:
        return cls

    __rmul__ = __add__ = __radd__ = __sub__ = __rsub__ = __truediv__ = __floordiv__ = __mul__

    def __lt__(cls, other: object) -> bool:
        return False

    __gt__ = __le__ = __ge__ = __lt__

    def __hash__(cls) -> int:
        return id(cls)


class _StubBase(metaclass=_StubMeta):
    """Base of every stand-in class: instantiable with any arguments, subclassable."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __init_subclass__(cls, **kwargs: object) -> None:
        pass


class _Inert:
    """What calling a stand-in returns: any attribute, item, call or operator answers inertly.

    Called with one callable it returns that callable, so it also works as a decorator
    (``@torch.compile(dynamic=True)``).
    """

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()

    def __call__(self, *args: object, **kwargs: object) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return _Inert()

    def __getitem__(self, key: object) -> Any:
        return self

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __bool__(self) -> bool:
        return False

    def __or__(self, other: object) -> Any:
        return self

    __ror__ = __or__


class StubModule(types.ModuleType):
    """A stand-in module: CamelCase attributes are stand-in classes, others stand-in modules.

    Called, it behaves as a pass-through decorator (``@triton.jit``) or returns an inert value.
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ABSENT.get(self.__name__, ()):
            raise AttributeError(name)
        if name.lstrip("_")[:1].isupper():
            cls = _StubMeta(name, (_StubBase,), {"__module__": self.__name__})
            setattr(self, name, cls)
            return cls
        full = f"{self.__name__}.{name}"
        child = sys.modules.get(full)
        if child is None:
            child = StubModule(full)
            sys.modules[full] = child
        setattr(self, name, child)
        return child

    def __call__(self, *args: object, **kwargs: object) -> Any:
        return _Inert()(*args, **kwargs)

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Iterator[Any]:
        return iter(())

    def __getitem__(self, key: object) -> Any:
        return self

    def __or__(self, other: object) -> Any:
        return self

    __ror__ = __or__


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers imports of the chosen top-level names (and their submodules) with stand-ins."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = frozenset(names)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] not in self.names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        for name, value in VERSIONS.get(module.__name__, {}).items():
            setattr(module, name, value)


def install(names: Iterable[str] = HEAVY) -> None:
    """Answer imports of ``names`` with stand-ins from now on, in this process.

    Args:
        names: top-level module names (default: every one in ``HEAVY``); each must be in
            ``HEAVY`` or ``OPTIONAL`` (a stand-in is only ever used with its reason written).

    Raises:
        ValueError: a name without a reason.
    """
    names = tuple(names)
    unexplained = [n for n in names if n not in HEAVY and n not in OPTIONAL]
    if unexplained:
        raise ValueError(f"no reason recorded for a stand-in of {', '.join(unexplained)}")
    sys.meta_path.insert(0, _StubFinder(names))


def is_stub(value: object) -> bool:
    """True when ``value`` is, or contains, a stand-in (a module, a class or an instance).

    Args:
        value: a value recorded from SGLang's parser (a choice, a default, a const).

    Returns:
        Whether any part of it came from a stand-in.
    """
    if isinstance(value, StubModule | _StubMeta | _StubBase | _Inert):
        return True
    if isinstance(value, list | tuple | set | frozenset):
        return any(is_stub(item) for item in value)
    if isinstance(value, dict):
        return any(is_stub(k) or is_stub(v) for k, v in value.items())
    return False

"""Import only the parts of kubernetes-asyncio the client uses.

Our client takes authentication and transport from kubernetes-asyncio (``Configuration``,
``ApiClient``'s aiohttp session, the kubeconfig and in-cluster loaders) and speaks raw JSON
itself. But ``import kubernetes_asyncio`` runs package initialisers that load every
generated API class and model: about 60 MB of memory and a third of a second, in a
controller that uses none of them.

:func:`import_lean` registers the three package modules involved (``kubernetes_asyncio``,
``kubernetes_asyncio.client`` and ``kubernetes_asyncio.client.models``) *without* running
their initialisers, then loads just the submodules the client needs. Nothing is lost:
each lean package module loads the rest on first use of a name it lacks (PEP 562
``__getattr__`` runs the real initialiser into the same module), so a program that
later uses ``kubernetes_asyncio.client.CoreV1Api`` or ``from kubernetes_asyncio.client
import V1Pod`` gets them as usual. If kubernetes-asyncio was imported already, nothing is
changed.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

_ROOT = "kubernetes_asyncio"
_CLIENT = f"{_ROOT}.client"
_MODELS = f"{_CLIENT}.models"
#: What the lean ``kubernetes_asyncio.client`` gets without loading the rest.
_CLIENT_NAMES = {"ApiClient": "api_client", "Configuration": "configuration",
                 "ApiException": "exceptions", "ApiValueError": "exceptions"}
#: Subpackages of ``kubernetes_asyncio`` its initialiser would import.
_ROOT_SUBPACKAGES = ("client", "config", "dynamic", "stream", "utils", "watch")


class _LeanPackage(types.ModuleType):
    """A package module whose initialiser runs on first use of a name it lacks."""

    _lean_init: Path
    _lean_loaded: bool

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or self.__dict__.get("_lean_loaded", True):
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        where = self._lean_init.parent
        if (where / f"{name}.py").is_file() or (where / name / "__init__.py").is_file():
            # A submodule (``from package import submodule`` asks for it first): load
            # just that one.
            return importlib.import_module(f"{self.__name__}.{name}")
        self.__dict__["_lean_loaded"] = True
        code = compile(self._lean_init.read_text(encoding="utf-8"), str(self._lean_init),
                       "exec")
        exec(code, self.__dict__)
        return getattr(self, name)


def _lean_package(name: str, directory: Path) -> _LeanPackage:
    module = _LeanPackage(name)
    module.__path__ = [str(directory)]
    module.__file__ = str(directory / "__init__.py")
    module.__package__ = name
    module.__spec__ = importlib.util.spec_from_file_location(
        name, directory / "__init__.py", submodule_search_locations=[str(directory)])
    module.__dict__["_lean_init"] = directory / "__init__.py"
    module.__dict__["_lean_loaded"] = False
    sys.modules[name] = module
    return module


def import_lean() -> None:
    """Make ``import kubernetes_asyncio.client`` / ``.config`` cheap (see module docs)."""
    if _ROOT in sys.modules:
        return
    spec = importlib.util.find_spec(_ROOT)
    if spec is None or spec.origin is None:
        return
    root_dir = Path(spec.origin).parent
    root = _lean_package(_ROOT, root_dir)
    client = _lean_package(_CLIENT, root_dir / "client")
    models = _lean_package(_MODELS, root_dir / "client" / "models")
    root.__dict__["client"] = client
    client.__dict__["models"] = models
    try:
        for attr, sub in _CLIENT_NAMES.items():
            module = importlib.import_module(f"{_CLIENT}.{sub}")
            client.__dict__[attr] = getattr(module, attr)
        root.__dict__["config"] = importlib.import_module(f"{_ROOT}.config")
    except Exception:
        # An unexpected layout (another kubernetes-asyncio version): import it whole.
        for name in [n for n in sys.modules if n == _ROOT or n.startswith(_ROOT + ".")]:
            del sys.modules[name]
        importlib.import_module(_ROOT)
        return
    # The root's own initialiser only imports its subpackages; make them lazy instead.
    root.__dict__["_lean_loaded"] = True

    def _root_getattr(name: str) -> Any:
        if name in _ROOT_SUBPACKAGES:
            return importlib.import_module(f"{_ROOT}.{name}")
        raise AttributeError(f"module {_ROOT!r} has no attribute {name!r}")

    root.__dict__["__getattr__"] = _root_getattr

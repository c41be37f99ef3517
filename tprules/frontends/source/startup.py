"""What `tprules import hf` loads before it reads a model: torch and the part of
transformers that builds a causal LM, less two costs of that load that an import never
uses (issue 24: loading torch and transformers is most of a `--no-data` import).

- transformers lists the import structure of its ~560 model folders twice, once for the
  package and once for `transformers.models`, through an lru_cache of 128 entries: the
  second listing reads every folder's files again (0.25 s). Here that cache keeps them all.
- transformers' modeling_utils imports every loss, and its object-detection losses import
  scipy.optimize where scipy is installed (0.25 s). No causal LM computes a loss in an
  import, so while modeling_utils loads, those losses are told scipy is absent (their
  Hungarian matching would then ask for it); everything else, transformers' own tables
  of which backends are installed among them, sees scipy as it is.

Where transformers is already loaded (a test process, an import after another), nothing
is changed.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from contextlib import contextmanager
from typing import Any, cast

from ..errors import MissingExtra

_IMPORT_UTILS = "transformers.utils.import_utils"
_SCAN = "create_import_structure_from_path"


def load_extra() -> None:
    """Import torch, transformers (its modeling_utils) and safetensors, or say in one line
    what to install."""
    for module in ("torch", "transformers", "safetensors"):
        try:
            if module == "transformers":
                with _one_listing_of_models():
                    import transformers.models  # noqa: F401 - its lazy modules see every backend there is
                with _losses_without_scipy():
                    import transformers.modeling_utils  # noqa: F401
            else:
                __import__(module)
        except ImportError:
            raise MissingExtra(module) from None


@contextmanager
def _losses_without_scipy():
    """transformers.utils.is_scipy_available says False to the modules that import it while
    this lasts (the losses, which test it once as they load), and is itself again after."""
    import transformers.utils as utils

    if "transformers.modeling_utils" in sys.modules or "scipy" in sys.modules:
        yield
        return
    available = utils.is_scipy_available

    def absent() -> bool:
        return False

    utils.is_scipy_available = absent
    try:
        yield
    finally:
        utils.is_scipy_available = available
        for name, module in list(sys.modules.items()):
            if name.startswith("transformers.") and getattr(module, "__dict__", {}).get("is_scipy_available") is absent:
                cast(Any, module).is_scipy_available = available  # a module's own name, patched back


class _UnboundedScanCache(importlib.abc.MetaPathFinder):
    """Loads transformers.utils.import_utils as usual, then gives its folder listing a
    cache without a size limit (the listing calls itself by that module-level name)."""

    def find_spec(self, name, path, target=None):
        if name != _IMPORT_UTILS:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            scan = getattr(module, _SCAN, None)
            if scan is not None and hasattr(scan, "cache_info") and hasattr(scan, "__wrapped__"):
                setattr(module, _SCAN, functools.lru_cache(maxsize=None)(scan.__wrapped__))

        cast(Any, spec.loader).exec_module = exec_module  # this module's loading, patched
        return spec


@contextmanager
def _one_listing_of_models():
    if "transformers" in sys.modules:
        yield
        return
    finder = _UnboundedScanCache()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)

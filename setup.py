"""The one thing pyproject.toml cannot say: two package folders that live outside the
package. The rules (`rules/`) and the shim library (`facts/shims/`) stay where the
repository keeps them, one copy each, and the wheel holds them as `tprules/defaults/rules`
and `tprules/defaults/shims`, where tprules/config.py finds them (importlib.resources).
Everything else is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

DEFAULTS = {"tprules.defaults.rules": "rules", "tprules.defaults.shims": "facts/shims"}

setup(
    packages=find_namespace_packages(include=["tprules*"]) + list(DEFAULTS),
    package_dir=DEFAULTS,
    package_data={"tprules.datalog.lang": ["*.lark"], "tprules.defaults.rules": ["*.dl"],
                  "tprules.defaults.shims": ["*.facts"]},
)

"""The package version, in a module of its own so stages can read it without importing
the package's face (tprules/__init__.py, which loads the Shim API)."""

__version__ = "0.1.0"

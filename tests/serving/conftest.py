"""The frontends' tiny models and their imports, for the serving loop's tests."""

from tests.frontends.conftest import hf_model, imported  # noqa: F401 - fixtures, found by name

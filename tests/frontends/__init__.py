"""Tests of tprules/frontends (the Hugging Face importer); a package so its conftest stays its own."""

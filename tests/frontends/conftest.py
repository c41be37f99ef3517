"""One tiny model per architecture and one import per (architecture, TP) for the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from .tiny import make_model


@pytest.fixture(scope="session")
def hf_model(tmp_path_factory):
    """`hf_model("llama")`: the folder of a tiny model saved with save_pretrained."""
    made: dict[str, Path] = {}

    def get(model_type: str) -> Path:
        if model_type not in made:
            made[model_type] = make_model(tmp_path_factory.mktemp(model_type), model_type)
        return made[model_type]

    return get


@pytest.fixture(scope="session")
def imported(hf_model, tmp_path_factory):
    """`imported("llama", 2)`: the program folder of that model imported at TP 2;
    `imported("llama", 2, decode=True, past=5, cache_len=10)`: of its decode step (import hf --decode)."""
    from tprules.frontends.drivers.decode import import_decode
    from tprules.frontends.drivers.hf import import_hf

    done: dict[tuple, Path] = {}

    def get(model_type: str, tp: int, decode: bool = False, **options) -> Path:
        key = (model_type, tp, decode, tuple(sorted(options.items())))
        if key not in done:
            out = tmp_path_factory.mktemp(f"{model_type}-{'decode-' if decode else ''}tp{tp}") / "program"
            (import_decode if decode else import_hf)(hf_model(model_type), tp, out, **options)
            done[key] = out
        return done[key]

    return get

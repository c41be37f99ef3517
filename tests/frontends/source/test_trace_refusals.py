"""A forward that torch.export cannot trace because a shape or a branch depends on the data
is refused in one line naming the module and the op (frontends/source/trace.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tprules.frontends.errors import ImportFailed  # noqa: E402
from tprules.frontends.source.trace import trace  # noqa: E402


class Router(torch.nn.Module):
    def forward(self, x):
        if (x > 0).sum() > 2:  # a branch on the data: nothing a static trace can hold
            return x * 2
        return x


class Config:
    def to_dict(self):
        return {"model_type": "toy"}


class Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()
        self.embed = torch.nn.Embedding(16, 4)
        self.router = Router()

    def forward(self, input_ids, use_cache=False):
        return self.router(self.embed(input_ids))


def test_a_data_dependent_branch_is_one_line_naming_the_module_and_the_op():
    with pytest.raises(ImportFailed) as err:
        trace(Toy(), 1, 4, "ToyForCausalLM")
    text = str(err.value)
    assert "\n" not in text
    assert "data-dependent" in text and "at router: " in text and "__bool__" in text
    assert "test_trace_refusals.py:16" in text


def test_another_trace_failure_keeps_its_own_line():
    class Broken(Toy):
        def forward(self, input_ids, use_cache=False):
            raise ValueError("not today")

    with pytest.raises(ImportFailed) as err:
        trace(Broken(), 1, 4, "ToyForCausalLM")
    assert str(err.value).endswith("torch.export cannot trace the forward: not today")


class LoopedExperts(torch.nn.Module):
    """An experts loop over the experts hit (LongCat-Flash's): a count of the data."""

    def __init__(self):
        super().__init__()
        self.gate_up_proj = torch.nn.Parameter(torch.randn(3, 8, 4))
        self.down_proj = torch.nn.Parameter(torch.randn(3, 4, 4))

    def forward(self, x):
        hit = (x[..., :3] > 0).any(-2).any(0).nonzero()
        for e in hit:
            x = x + x @ self.down_proj[int(e.item())]
        return x


def test_an_experts_loop_with_no_static_form_says_so_in_its_line():
    toy = Toy()
    toy.router = LoopedExperts()
    with pytest.raises(ImportFailed) as err:
        trace(toy, 1, 4, "ToyForCausalLM")
    text = str(err.value)
    assert "\n" not in text and "at router: " in text
    assert "LoopedExperts has no batched_mm form" in text and "Size-like" not in text and "unhinted" not in text

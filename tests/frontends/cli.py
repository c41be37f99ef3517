"""What the import tests share: an import refused as bad input, what it left behind, a
--plan file, a plan for Llama and one that splits a Mixtral's experts."""

from __future__ import annotations

import json


def leftovers(parent, name) -> list[str]:
    """Anything an import left beside DIR: DIR itself or its temporary folders."""
    return sorted(p.name for p in parent.iterdir() if p.name == name or p.name.startswith(f".{name}."))


def assert_refused(cli, tmp_path, args, message: str) -> None:
    """`tprules ARGS` (an import whose --out is tmp_path/out) refused as bad input: exit 2,
    nothing on stdout, one line on stderr saying `message`, and no DIR or its temporary
    folders left."""
    status, out, err = cli(*args)
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and message in err, err
    assert leftovers(tmp_path, "out") == []


def plan_file(tmp_path, plan) -> str:
    """A plan file (a dict as JSON, or the text given) for --plan."""
    path = tmp_path / "plan.json"
    path.write_text(plan if isinstance(plan, str) else json.dumps(plan))
    return str(path)


LLAMA_PLAN = {"layers.*.self_attn.q_proj": "colwise", "layers.*.self_attn.k_proj": "colwise",
              "layers.*.self_attn.v_proj": "colwise", "layers.*.self_attn.o_proj": "rowwise"}


# transformers 5.24's TP plan of Mixtral (and Qwen3-MoE, whose experts sit at the same path):
# attention by head and the experts split, moe_tp_experts with the packed gate_up colwise and
# down rowwise. 5.25's own plans name no experts (they run replicated), so a test of the
# experts' split gives this plan itself, whatever the release installed.
EXPERTS_PLAN = {**LLAMA_PLAN, "layers.*.mlp.experts": "moe_tp_experts",
                "layers.*.mlp.experts.gate_up_proj": "packed_colwise", "layers.*.mlp.experts.down_proj": "rowwise"}

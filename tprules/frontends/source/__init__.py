"""What an import reads, before anything is lowered: the model, its plan, its trace.

startup.py      load torch and the part of transformers that builds a causal LM, less what an
                import never uses (a second listing of its model folders, scipy)
pretrained.py   a save_pretrained folder: config.json, the plan (`base_model_tp_plan`,
                `base_model_ep_plan` or --plan), the weights; the model built from them
torch_plan.py   an `import torch` recipe: `model()`, `inputs()` and a PLAN in torch's own API,
                each ParallelStyle read as a Style with ports
decode_step.py  one decode step as torch runs it: transformers' static cache as forward's
                inputs and outputs
core_aten.py    torch.export of a module to core ATen, in one trace
trace.py        the causal-LM forward traced (kept per process by config and shape)
constants.py    what does not depend on `input_ids`: a weight, a transposed weight, or a folded
                subgraph that becomes a program input
arrays.py       a torch tensor as numpy: the importer's one converter (data, expected, the check)
"""

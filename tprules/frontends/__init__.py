"""Frontends: real models in, program folders (SPEC §1) out. Beside the pipeline: nothing
in program/, runtime/ or codegen/ knows where a program came from.

`tprules import hf SOURCE --tp N --out DIR` runs these passes, in order:

0. startup.py    load torch and the part of transformers that builds a causal LM, less
                 what an import never uses (a second listing of its model folders, scipy);
1. hf.py         read a save_pretrained folder: config.json, the tensor-parallel plan
                 (`base_model_tp_plan`, or --plan), the weights; build the model (on meta
                 tensors with --no-data);
2. layers.py     the decoder layers' kinds (equal module trees and per-layer config
                 values); the model lends a layer list of each kind's first and second
                 layer to be traced;
   trace.py      torch.export of the causal-LM forward (prefill, fixed batch and sequence),
                 lowered to core ATen in one trace (core_aten.py);
3. constants.py  what does not depend on `input_ids` is a constant: a weight, a transposed
                 weight, or a folded subgraph (RoPE tables, the causal mask) that becomes a
                 program input;
4. aten.py       the op table: each ATen node becomes one statement of a registry class
                 (one small function per op; one error naming the op for the rest);
   lower.py      the walk over the traced graph that calls it;
5. sharding.py   the sharding table: how Replicate / Shard / Partial placements flow
                 through each class (placement.py), from the plan's colwise and rowwise;
6. tp.py         the TP program: a chip's statements where the placement is a shard or a
                 partial, a fold wherever a partial meets a class that needs the whole sum;
7. stamp.py      every layer stamped from the traced ones (names renumbered as a full
                 trace numbers them), as columns (program/facts.py: pyarrow arrays, the
                 candidates over interned columns, pyarrow's CSV writer);
8. write.py      candidates (producer → consumer, siblings), data/ (a weight sharded one
                 file per chip), expected/logits.npy (torch's own forward), all written into
                 a temporary folder renamed into place at the end.

`importer.import_hf` is the driver.

`tprules import torch RECIPE.py --tp N --out DIR` runs the same passes from a module and a
plan in torch's own API (`torch_import.import_torch`, the driver): torch_plan.py loads the
recipe (`model()`, `inputs()`, `PLAN`) and reads each ParallelStyle as a Style whose ports
(styles.py) state its layouts; trace.export traces the forward; tp.py's Sharder turns each
port's change of layout into the collective DTensor inserts (ports.py).
"""

from .errors import ImportFailed, MissingExtra

__all__ = ["ImportFailed", "MissingExtra"]

"""Frontends: real models in, program folders (SPEC §1) out. Beside the pipeline: nothing
in program/, runtime/ or codegen/ knows where a program came from.

The importer is two tables and a driver (STYLE.md: Inductor's lowering table, DTensor's
sharding rules). `tprules import hf SOURCE --tp N --out DIR`, `import hf --decode` and
`import torch RECIPE.py` run the same stages, in order:

source/    what is read: the save_pretrained folder or the recipe, the plan, the model; its
           forward traced with torch.export in core ATen; constants folded into inputs
lowering/  the op table: each ATen node becomes one statement of a registry class (one
           small function per op; one error naming every op the table lacks)
sharding/  the sharding table (how Replicate / Shard / Partial placements flow through each
           class), the plan's styles as ports, and the Sharder: a chip's statements where a
           placement is a shard or a partial, a fold where a partial meets a class that
           needs the whole sum
layers/    each decoder layer once: the layers traced per kind, the rest stamped from them
drivers/   the import jobs (hf, decode, torch recipe: one ImportJob, `prepare`, `Built`,
           `Checked`, `written`) and their shared tail: the data and expected files, the self-check on
           a second input, a folder written whole or not at all

The facts the Sharder and the stamper emit are one container (program/facts.py), their
candidates computed once (program/candidates.py).

graph.py   the imported model before tensor parallelism (whole tensors), shared by the stages
errors.py  what an import that cannot be done says: one line, exit 2, no partial DIR
"""

from .errors import ImportFailed, MissingExtra

__all__ = ["ImportFailed", "MissingExtra"]

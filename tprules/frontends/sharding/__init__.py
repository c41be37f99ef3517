"""The sharding table and the Sharder: a graph of whole tensors and a plan in, a TP program
(SPEC §2: each chip's statements, the spine's, and the folds between them) out. In order:

placement.py  Replicate / Shard / Partial: where a whole tensor's values live on N chips
styles.py     the plan styles (transformers' and torch's) as ports, and what each means
weights.py    each weight placed by its style; the heads and experts checked against the chips
sequence.py   a sequence_parallel module checked to work token by token (through the table)
rules.py      the sharding rules of the classes that compute (elementwise, row, matmuls, ...)
views.py      the sharding rules of the layout classes (reshape, permute, slice, ...)
table.py      the sharding table: one record per registry class, its rule and its columns
emit.py       the TP program under construction: its values, placements and collectives
dispatch.py   expert parallelism: each chip's routing slots over its own experts
ports.py      a module's boundary: each port's redistribution, the experts' routing
sharder.py    the Sharder: each statement placed by the table, its reads through the boundary
"""

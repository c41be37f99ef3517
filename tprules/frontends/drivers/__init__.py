"""Drivers: one import job from a model to a program folder, through the passes of
frontends/__init__.py, in order:

job.py      the import job (ImportJob): `prepare` (the counts, DIR, the clock) and
            `pretrained` (a Hugging Face folder read, its model built, its plan applied);
hf.py       `tprules import hf`: the prefill traced whole or each layer kind once, stamped;
decode.py   `tprules import hf --decode`: one decode step over a static cache;
recipe.py   `tprules import torch`: a module and its plan in torch's own API (a recipe file);
built.py    the tail the three share: sharded whole or stamped, each input's data, the
            written folder's check (`Checked`) and `written` (the folder, the report);
ties.py     a top-k whose answer could depend on torch's tie-break, refused before any data is
            computed (issue 51); fixed.py what the graph holds whatever its input, for it;
verify.py   the check on a second input (and where the program chooses by value, a tie-prone
            one) against torch, naming the first statement that differs;
write.py    the folder written whole or not at all (the candidates are program/candidates.py).
"""

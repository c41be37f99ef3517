"""Drivers: one import job from a model to a program folder, through the passes of
frontends/__init__.py, in order:

job.py      the import job (ImportJob): `prepare` (the counts, DIR, the clock), `pretrained`
            (a Hugging Face folder read and built, its plan applied), `Checked` (the written
            folder's check) and `written` (the folder written, the report);
hf.py       `tprules import hf`: the prefill traced whole or each layer kind once, stamped;
decode.py   `tprules import hf --decode`: one decode step over a static cache;
recipe.py   `tprules import torch`: a module and its plan in torch's own API (a recipe file);
built.py    the build's tail every driver shares: sharded whole or stamped, each input's data;
verify.py   the check on a second input against torch, naming the first statement that differs;
write.py    the candidates, and the folder written whole or not at all.
"""

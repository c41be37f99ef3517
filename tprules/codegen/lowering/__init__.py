"""A planned group lowered to the kernel IR (codegen/ir.py), in order:

schedule.py    the group's members split into stages; which values go through memory
layout.py      layout classes: each element one element of an operand, read at another index
window.py      window classes computed where they are read; put_along's description
attention.py   attention's chain folded into one stage (and unfolded where a device cannot run it)
lower.py       the kernel: parameters, and per stage the expressions it stores
"""

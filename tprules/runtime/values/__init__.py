"""What a run's outputs should be, and how close they are:

inputs.py      program inputs: DIR/data/<tensor>.npy, else values from a fixed seed per tensor
semantics.py   the class registry's meaning in numpy (SPEC §4): the living definition
reference.py   the unfused reference, statement by statement
compare.py     the device's outputs compared with the reference (and DIR/expected/ when there)
"""

"""The plan as the runtime takes it, in order:

groups.py          the plan checked against the program, its groups ordered (producers first)
collective.py      a collective kernel (a group of place `collective`) expanded into its parts
reduce_scatter.py  a `sum` fold read only by one slice per chip, run as one reduce-scatter
"""

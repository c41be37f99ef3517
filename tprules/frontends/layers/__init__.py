"""Each decoder layer once: a model traced with one or two layers of each kind, the rest
stamped from them.

kinds.py      layer kinds: decoder layers grouped by equal module trees and per-layer config
              values; the reduced layer list the trace reads
stamp.py      every layer's facts stamped from the traced ones, names renumbered as a full trace
              numbers them
per_layer.py  a decode step's position values computed in each layer that reads them
"""

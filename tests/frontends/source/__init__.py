"""Tests of tprules/frontends/source/ (the model, its plan, its trace)."""

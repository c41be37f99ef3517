"""Tests of tprules/frontends/lowering/ (the op table and the Lowerer), one module each."""

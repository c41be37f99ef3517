"""Tests of tprules/frontends/sharding/: the table, its rules, the Sharder, the plan styles."""

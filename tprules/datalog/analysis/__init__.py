"""AST → checked rules: static checks, stratification, candidate locality."""

from .checked import CheckedRules, check_rules, load_rules

__all__ = ["CheckedRules", "check_rules", "load_rules"]

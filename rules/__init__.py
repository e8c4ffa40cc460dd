"""The rule engine: the model's fallback and the operator's overrides (see rules/engine.py).

Input: Features. Output: Verdicts (source `rules` or `override`). `RuleEngine.load()` compiles the packaged
rules/default.yaml; `python -m rules.eval` measures a ruleset on labelled data.
"""

from rules.engine import RuleEngine, RuleError, RuleResult

__all__ = ["RuleEngine", "RuleError", "RuleResult"]

"""The profile sections of evaluation: greedy decoding (App. B), the rule-faithfulness interventions (App. I,
Tables 7 and 14; their systems come from ``edit_lib.systems``) and question-level significance (App. G)."""
from __future__ import annotations

from dataclasses import dataclass

from edit_lib.config.checks import (ConfigError, Decoding, _at_least, _budget, _fraction, _one_of, decoding,
                                    help_field as _f)
from edit_lib.systems import SYSTEMS


@dataclass
class EvalConfig:
    decoding: Decoding = decoding("How a marking is decoded at evaluation (App. B 'Decoding and evaluation': "
                                  "greedy, one completion per response).", greedy=True, max_new_tokens=1024)
    batch_size: int = _f(16, "Prompts per batch at evaluation.")
    invalid_as: str = _f("wrong", "A completion whose mark cannot be parsed: 'wrong' (scored as the valid mark "
                                  "farthest from gold in every metric, counted in n_invalid) or 'zero' (scored as "
                                  "mark 0, as SAS-Bench's scorer does; for comparison only).")
    forced_read: bool = _f(False, "Suite's choice for small models (cpu-real), never the paper's: a completion whose "
                                  "final line cannot be parsed also gets the forced read (the probe's scaffold after "
                                  "its steps, argmax of p_T; edit_lib/evaluation/predictions.py), reported beside the "
                                  "parse-only metrics under its own status, never mixed with real parses.")

    def __post_init__(self):
        _at_least(self, 1, "batch_size")
        _budget(self.decoding, "decoding")
        _one_of(self, "invalid_as", ("wrong", "zero"))


def main_table_systems() -> list[str]:
    """The systems with a column in Tables 1-2 (``System.main_column``), in ``SYSTEMS`` order: the columns of
    Tables 7 and 14 too (App. I)."""
    return [s.name for s in SYSTEMS if s.main_column is not None]


@dataclass
class RSRConfig:
    datasets: list = _f([], "Datasets the rule-faithfulness interventions run on (App. I: Private-Biology); [] means "
                            "every dataset of the run with PTS or LoR questions.")
    splits: list = _f(["id_test", "ood_test"], "Splits whose responses are regraded under each edit.")
    responses_per_edit: int = _f(0, "Responses regraded per edit and dataset (a seeded sample, the same for every "
                                    "system); 0 means all of them.")
    systems: list = _f(help="Systems graded under the edits (Table 7, Table 14); default: the main tables' "
                            "systems of edit_lib/systems.py.", factory=main_table_systems)

    def __post_init__(self):
        bad = [x for x in self.splits if x not in ("train", "id_test", "ood_test")]
        if bad or not self.splits:
            raise ConfigError(f"splits must be a non-empty list of train / id_test / ood_test, got {self.splits!r}")
        _at_least(self, 0, "responses_per_edit")
        names = isinstance(self.systems, list) and all(isinstance(x, str) and x for x in self.systems)
        if not (names and self.systems):
            raise ConfigError(f"systems must be a non-empty list of system names, got {self.systems!r}")
        # the names themselves: edit_lib/systems.py's or run.baselines' (runner.preflight, which loads the baselines)


@dataclass
class SignificanceConfig:
    n_boot: int = _f(10000, "Cluster-bootstrap resamples over questions (App. G).")
    ci: float = _f(0.95, "Confidence level.")
    min_questions: int = _f(10, "Suite's choice: a scope with fewer held-out questions shows its interval and 'too few "
                                "questions' instead of a p-value (a cluster bootstrap over so few clusters understates "
                                "the uncertainty); the claims ledger calls such a comparison inconclusive.")

    def __post_init__(self):
        _at_least(self, 1, "n_boot")
        _at_least(self, 2, "min_questions")
        _fraction(self, "ci", open_low=True, open_high=True)

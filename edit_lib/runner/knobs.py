"""The knobs of each notebook's parameters cell: the profile values a reader of the stage would turn.

A notebook's parameters cell lists ``profile``, ``overrides``, ``run_root`` and ``variant`` and then its stage's
knobs, each ``None`` (the profile's value) with its one-line help as a comment (``parameters_cell`` writes the
cell; ``tests/runner/test_variants.py`` keeps the notebooks, the stages' declared sections and this table in step).
papermill sets a knob as it sets the rest (``-p shortlist_k 5``); ``stage`` folds the knobs that are not None into
the overrides (``fold``), so keys, cache, variants and book treat a knob as any ``section.key=value`` override.
"""
from __future__ import annotations

import json
import math
from typing import Any

MAX_KNOBS = 10  # with profile, overrides, run_root and variant: within the 15-line cell rule
FIXED = {  # every notebook's own parameters, in this order: {name: (default as written, help)}
    "profile": ('"demo"', "a profile name in configs/, or the path of a YAML profile file"),
    "overrides": ("[]", "more profile values: a list of strings as `edit-suite run -p` takes them"),
    "run_root": ("None", "folder that holds <profile>/ runs; None means the suite's runs/ folder"),
    "variant": ("None", "a variant's name; None: the main run, or one named from its changed values"),
}

# {stage: {variable of the parameters cell: dotted profile value}}, each within the stage's declared sections
KNOBS: dict[str, dict[str, str]] = {
    "00_data": dict(seed="run.seed", on_error="data.on_error", max_skipped_fraction="data.max_skipped_fraction"),
    "01_base_policy": dict(
        n_per_response="rollouts.n_per_response", responses_per_dataset="rollouts.responses_per_dataset",
        temperature="rollouts.temperature", top_p="rollouts.top_p", max_new_tokens="rollouts.max_new_tokens",
        eval_greedy="eval.greedy", eval_max_new_tokens="eval.max_new_tokens", invalid_as="eval.invalid_as",
        step_rule="steps.rule", seed="run.seed"),
    "02_probing": dict(
        temperature="probe.temperature", read="probe.read", max_rollouts="probe.max_rollouts", dtype="probe.dtype",
        tie_margin="selection.tie_margin", step_rule="steps.rule", seed="run.seed"),
    "03_audit_validation": dict(
        nll_reduction="audit.nll_reduction", residual_method="audit.residual_method",
        residual_bins="audit.residual_bins", residual_min_count="audit.residual_min_count",
        residual_bandwidth="audit.residual_bandwidth", max_rollouts="audit.max_rollouts",
        annotator="analysis.step_annotator", seed="run.seed"),
    "04_counterfactual_selection": dict(
        shortlist_k="selection.shortlist_k", budget_n="selection.budget_n", tie_margin="selection.tie_margin",
        percentile="selection.percentile", random_seed="selection.random_seed",
        max_rollouts="selection.max_rollouts", n_continuations="revision.n_continuations",
        max_span="revision.max_span", continuation_temperature="revision.continuation_temperature",
        n_proposals="int_sft.n_proposals"),
    "05_edit_sft": dict(
        golden_per_revision="sft.golden_per_revision", epochs="sft.epochs", learning_rate="sft.learning_rate",
        lora_r="sft.lora.r", lora_alpha="sft.lora.alpha", lora_dropout="sft.lora.dropout",
        effective_batch_size="sft.effective_batch_size", max_pool="sft.max_pool",
        check_responses="sft.check_responses", skip_systems="run.skip_systems"),
    "06_rl": dict(
        learning_rate="rl.learning_rate", beta_kl="rl.beta_kl", rollouts_per_prompt="rl.rollouts_per_prompt",
        temperature="rl.temperature", steps="rl.steps", seeds="rl.seeds", beta_drift="rl.shaping.beta_drift",
        gamma="rl.shaping.gamma", calibrate="rl.shaping.calibrate", skip_systems="run.skip_systems"),
    "07_evaluation": dict(
        greedy="eval.greedy", max_new_tokens="eval.max_new_tokens", invalid_as="eval.invalid_as",
        forced_read="eval.forced_read", skip_systems="run.skip_systems", seed="run.seed"),
    "08_rsr_interventions": dict(
        rsr_datasets="rsr.datasets", splits="rsr.splits", responses_per_edit="rsr.responses_per_edit",
        systems="rsr.systems"),
    "09_significance": dict(
        n_boot="significance.n_boot", ci="significance.ci", min_questions="significance.min_questions",
        invalid_as="eval.invalid_as"),
}


def yaml_value(value: Any) -> str:
    """A Python value as an override's YAML text: JSON, with a float's exponent written so that YAML 1.1 reads a
    float (``5e-06`` is a string to PyYAML, ``5.0e-06`` a float)."""
    if isinstance(value, float) and math.isfinite(value):
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:
            head, exp = text.split("e")
            text = f"{head}.0e{exp if exp[0] in '+-' else '+' + exp}"
        return text
    return json.dumps(value)


def fold(stage: str, namespace: dict | None) -> list[str]:
    """The overrides the knobs of ``stage`` set in ``namespace`` (a notebook's globals): ``path=value`` for every
    knob that is not None, in the table's order."""
    if not namespace:
        return []
    return [f"{path}={yaml_value(namespace[var])}" for var, path in KNOBS.get(stage, {}).items()
            if namespace.get(var) is not None]


def parameters_cell(stage: str, helps: dict[str, str], width: int = 118) -> str:
    """The parameters cell of ``stage``'s notebook: the fixed parameters, then each knob as ``name = None  # help``
    (``helps``: {dotted path: help text}, cut to the line's ``width``); one '=' a line, as papermill's parameter
    inspection (``papermill --help-notebook``) reads it."""
    if len(KNOBS.get(stage, {})) > MAX_KNOBS:
        raise ValueError(f"{stage}: {len(KNOBS[stage])} knobs, more than {MAX_KNOBS} fit the parameters cell")
    lines = ["# Parameters (papermill sets them; a knob left None keeps the profile's value)",
             *(f"{name} = {default}  # {help_}" for name, (default, help_) in FIXED.items())]
    for var, path in KNOBS.get(stage, {}).items():
        head = f"{var} = None  # {path}: "
        # papermill's parameter inspection skips a line with a second '=' (the help says ':' instead)
        text = " ".join(helps.get(path, "").replace(" = ", ": ").replace("=", ": ").split())
        if len(head) + len(text) > width:
            text = text[: width - len(head) - 3].rstrip() + "..."
        lines.append(head + text)
    return "\n".join(lines)

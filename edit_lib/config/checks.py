"""The pieces every profile section is built from: the field helper with help text, the error a bad profile
raises, the checks a section runs on its own values in ``__post_init__``, and the one decoding spec
(``Decoding``) that every section which samples or decodes holds."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Callable


def help_field(default: Any = dataclasses.MISSING, help: str = "", *, factory: Callable[[], Any] | None = None,
               **kw: Any) -> Any:
    """A dataclass field with help text: the one field helper of the library (profiles, sampling, the synthetic
    world, the embedded recipe). List/dict defaults are copied per instance; ``factory`` builds the default
    (a nested dataclass); neither makes the field required."""
    if factory is not None:
        return field(default_factory=factory, metadata={"help": help}, **kw)
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda d=default: json.loads(json.dumps(d)), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


class ConfigError(ValueError):
    """A profile that cannot be loaded: unknown key, wrong type, missing file, a value a section rejects."""


def to_dict(obj: Any) -> Any:
    return dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj


def _at_least(obj, low: float, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if v < low:
            raise ConfigError(f"{n} must be >= {low}, got {v!r}")


def _positive(obj, *names: str) -> None:
    for n in names:
        v = getattr(obj, n)
        if not v > 0:
            raise ConfigError(f"{n} must be > 0, got {v!r}")


def _fraction(obj, *names: str, open_low: bool = False, open_high: bool = False) -> None:
    for n in names:
        v = getattr(obj, n)
        if not ((v > 0 if open_low else v >= 0) and (v < 1 if open_high else v <= 1)):
            raise ConfigError(f"{n} must be in {'(' if open_low else '['}0, 1{')' if open_high else ']'}, got {v!r}")


def _workers_or_processes(obj, prefix: str = "") -> None:
    """``workers`` (several runs on the engine) and ``processes`` (one run over several) exclude each other."""
    if obj.workers != 1 and obj.processes > 1:
        raise ConfigError(f"{prefix}workers={obj.workers} and {prefix}processes={obj.processes}: set one of them "
                          f"(several runs on the engine, or one run over several processes)")


def _one_of(obj, name: str, choices) -> None:
    v = getattr(obj, name)
    if v not in choices:
        raise ConfigError(f"{name} must be one of {tuple(choices)}, got {v!r}")


@dataclass
class Decoding:
    """The one decoding spec: how a single completion is decoded. Every profile section that samples or decodes
    holds one (``rollouts.decoding``, ``eval.decoding``, ``rl.decoding``, ``int_sft.decoding``,
    ``belief_check.decoding``, the revision's ``checklist_decoding`` / ``rewrite_decoding`` /
    ``continuation_decoding``), the embedded grader's acceptance check too, and generation takes it as the first
    part of ``model.generate.SamplingConfig`` (which adds how many, in what batches, under which seed). Paper:
    greedy, one completion per marking at evaluation (App. B); rollouts at T = 1.0 with a 1,024-token budget
    (App. B, Table 9)."""

    # each section's field help gives its paper values; ``describe`` joins it to these
    greedy: bool = help_field(False, "Argmax decoding; temperature, top_p, top_k unused.")
    temperature: float = help_field(1.0, "Sampling temperature.")
    top_p: float = help_field(1.0, "Nucleus sampling mass (1.0: off).")
    top_k: int = help_field(0, "Top-k sampling (0: off).")
    max_new_tokens: int = help_field(1024, "Completion budget in tokens (0: a fallback, where the section names one).")

    def __post_init__(self):
        if not isinstance(self.greedy, bool):
            raise ConfigError(f"greedy must be true or false, got {self.greedy!r}")
        _positive(self, "temperature")
        _fraction(self, "top_p", open_low=True)
        _at_least(self, 0, "top_k", "max_new_tokens")

    def fields(self) -> dict:
        """The spec as keyword arguments (what ``SamplingConfig.of`` copies)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(Decoding)}


def decoding(help: str = "", **values: Any) -> Any:
    """A section's ``Decoding`` field whose default sets ``values`` (each section's own paper values)."""
    return help_field(help=help, factory=lambda: Decoding(**values))


def _budget(dec: Decoding, name: str) -> None:
    """A section's ``Decoding`` whose budget has no fallback: at least one token."""
    if dec.max_new_tokens < 1:
        raise ConfigError(f"{name}.max_new_tokens must be >= 1, got {dec.max_new_tokens!r}")


def _sampled(dec: Decoding, name: str, own_budget: bool = True) -> None:
    """A section's ``Decoding`` that must sample (rollouts, RL groups, proposals, continuations): greedy would
    repeat one completion n times. ``own_budget`` False: a budget of 0 takes another section's."""
    if own_budget:
        _budget(dec, name)
    if dec.greedy:
        raise ConfigError(f"{name}.greedy must be false: these completions are sampled (n per prompt)")

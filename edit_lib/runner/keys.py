"""Stage keys: what a stage's results depend on, hashed, so a stale result is never shown as current.
Longer than 400 lines because the providers a key covers are registered here (``register_all``: the embedded
graders, the GGUF model, the synthetic analyses; the runner is the one layer that may import ``embedded``).

A stage's key hashes its *inputs*: (a) the profile values it declares (``Stage.sections``; dotted names such
as ``run.seed`` declare one value), (b) the full keys of its upstream stages, (c) the library code it runs: the
one rule of ``fingerprints`` (every module its notebook imports, transitively, the runner layer left out) plus
the providers its profile values select (``selected_modules``), and (d) for a stage that loads the
policy, a fingerprint of the model weights. The inputs are recorded in the results JSON, so the runner can say
*why* a stage runs (``why``). The notebook reads the profile through ``ProfileView``, which refuses any section
the stage did not declare, so (a) cannot drift from what the notebook reads.

Beside the key, every results JSON records ``numerics``: the floating-point setting the stage ran under (ATen's
``cpu_capability`` unless an environment variable caps it, and ``torch_threads``). Two machines that pick other
kernels can train a run to other last digits and flip a near-tied greedy token; ``edit-suite compare`` names it.
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edit_lib import providers
from edit_lib.artifacts import as_json, folder_digest, path_digest, short_hash
from edit_lib.embedded import annotate, behaviour, build, error_analysis, recipe
from edit_lib.fingerprints import file_hashes, imported_names, module_closure
from edit_lib.model import gguf_model
from edit_lib.systems import SYSTEMS, baseline_path


# ---------------------------------------------------------------- the shipped providers (register_all)

def _shipped_grader():
    if not (recipe.ASSETS_DIR / "config.json").exists():
        raise FileNotFoundError(f"no shipped grader in {recipe.ASSETS_DIR}; run `edit-suite build-grader`")
    return recipe.ASSETS_DIR


def _if_built(folder: Path, marker: str) -> Path | None:
    return folder if (folder / marker).exists() else None


def register_all() -> None:
    """Register every shipped provider (idempotent)."""
    providers.register("base", "embedded", providers.NamedBase(
        path=_shipped_grader, weights_id=lambda: "embedded:" + folder_digest(recipe.ASSETS_DIR),
        built=lambda: _if_built(recipe.ASSETS_DIR, "config.json"), plain_text=True),
        module=recipe.__name__)
    # built deterministically from the recipe by code that the stage key covers through this provider's module
    providers.register("base", "micro", providers.NamedBase(
        path=build.ensure_micro_grader,
        weights_id=lambda: "micro:" + hashlib.sha256(open(recipe.__file__, "rb").read()).hexdigest()[:12],
        built=lambda: _if_built(recipe.micro_cache_dir(), "recipe_hash.txt"), plain_text=True), module=build.__name__)
    providers.register("base", gguf_model.NAME, providers.NamedBase(
        path=gguf_model.ensure_checkpoint, weights_id=lambda: "gguf:" + gguf_model.checkpoint_dir().name,
        built=lambda: _if_built(gguf_model.checkpoint_dir(), "config.json"), plain_text=False), module=gguf_model.__name__)
    providers.register("annotator", "synthetic", annotate.synthetic_annotator, module=annotate.__name__)
    providers.register("behaviour", "synthetic", behaviour.behaviour_tables, module=behaviour.__name__)
    providers.register("error_analysis", "synthetic", error_analysis.app_h_tables, module=error_analysis.__name__)


def selected_modules(profile, sections: tuple[str, ...]) -> list[str]:
    """Modules of the providers ``profile`` selects through the profile values ``sections`` declare (a stage's
    declarations): their code is part of that stage's key (``fingerprints``)."""
    register_all()
    out = []
    for kind, key in providers.KINDS.items():
        section = key.split(".")[0]
        if not any(s == section or s == key for s in sections):
            continue
        obj = profile
        for part in key.split("."):
            obj = getattr(obj, part)
        p = providers.find(kind, obj)
        if p is not None:
            out.append(p.module)
    return out


@dataclass(frozen=True)
class Stage:
    name: str
    sections: tuple[str, ...]  # profile values the notebook may read (and that its key hashes)
    upstream: tuple[str, ...]
    title: str
    loads_model: bool = False  # its key includes the policy's weights fingerprint


# The probe settings the forced read uses (eval.forced_read; forced_read.py): the scaffold and the mark tokens.
FORCED_READ = ("probe.scaffold", "probe.terminator", "probe.read")

BASELINES = "run.baselines"  # the profile's baseline files: their code joins the key of each stage declaring it


def _with_systems(stage: str, sections: tuple[str, ...]) -> tuple[str, ...]:
    """``sections`` and those of the systems ``stage`` trains (``System.sections``), each once, in order."""
    own = tuple(x for s in SYSTEMS if s.stage == stage for x in s.sections)
    return tuple(dict.fromkeys(sections + own))


# The whole plan; a stage is runnable once its notebook exists. Declarations cover every `P.<section>` the
# notebook reads, including through library functions that receive the profile view.
STAGES: dict[str, Stage] = {s.name: s for s in [
    Stage("00_data", ("run.seed", "data"), (), "Data (App. A, Table 8)"),
    Stage("01_base_policy", ("model", "rollouts", "eval", "steps", "run.seed", "analysis.behaviour", *FORCED_READ),
          ("00_data",),
          "Base policy and rollouts", loads_model=True),
    Stage("02_probing", ("probe", "steps", "selection.tie_margin", "run.seed", "model"), ("01_base_policy",),
          "Posterior belief probe (Eq. 1-2)", loads_model=True),
    Stage("03_audit_validation", ("audit", "steps", "run.seed", "model", "analysis.step_annotator"), ("01_base_policy",),
          "Grounding audit validation (App. E, Table 11)", loads_model=True),
    Stage("04_counterfactual_selection", ("selection", "revision", "belief_check", "int_sft", "probe", "audit",
                                          "steps", "run.seed", "model", "rollouts.decoding.max_new_tokens",
                                          "sft.ablation_dataset", "sft.golden_per_revision", "analysis.step_annotator"),
          ("02_probing", "03_audit_validation"), "Counterfactual step selection (Alg. 1, App. C, F)", loads_model=True),
    Stage("05_edit_sft", _with_systems("05_edit_sft", (
        "selection", "revision", "sft", "int_sft", "eval", "steps", "run.seed", "run.skip_systems", BASELINES, "model",
        "rollouts.decoding.max_new_tokens", "analysis.step_annotator")),
          ("04_counterfactual_selection",), "EDIT-SFT, InT-SFT and the Table 6 ablations", loads_model=True),
    Stage("06_rl", _with_systems("06_rl", ("rl", "probe", "sft.lora", "eval", "steps", "run.seed", "run.skip_systems",
                                           BASELINES, "model")),
          ("05_edit_sft",),
          "RL: GRPO, DGPO, EDIT-RL, InT-RL (Tables 4, 5, 9, 10, Fig. 3)",
          loads_model=True),
    Stage("07_evaluation", ("eval", "steps", "run.seed", "run.skip_systems", BASELINES, "model",
                            "analysis.error_analysis",
                            *FORCED_READ), ("06_rl",),
          "Evaluation of every system (Tables 1, 2, 4, 5, 6, 13; App. H)", loads_model=True),
    Stage("08_rsr_interventions", ("rsr", "eval", "steps", "run.seed", "model", *FORCED_READ), ("07_evaluation",),
          "Rule-faithfulness interventions (App. I, Tables 7, 14)", loads_model=True),
    Stage("09_significance", ("significance", "run.seed", "eval.invalid_as", BASELINES), ("07_evaluation",),
          "Question-level significance (App. G, Table 3)"),
]}


# ------------------------------------------------------------------ library modules a notebook imports

def module_fingerprints(nb_path: Path, profile=None, name: str | None = None) -> dict[str, str]:
    """{file: hash of its bytes} for every module of the notebook's closure (``fingerprints``: the runner layer
    left out), plus the modules of the providers the profile selects for stage ``name`` (``register``) and, for
    a stage that declares ``run.baselines``, each baseline's file and the library modules it imports."""
    extra, files = set(), {}
    if profile is not None and name is not None:
        extra = set(selected_modules(profile, STAGES[name].sections))
        if BASELINES in STAGES[name].sections:
            for f in profile.run.baselines:
                text = baseline_path(f).read_text()
                extra |= imported_names(ast.parse(text, f), "")
                files[f"{BASELINES}:{f}"] = hashlib.sha256(text.encode()).hexdigest()[:12]
    return {**file_hashes(module_closure(nb_path, extra)), **files}


# ------------------------------------------------------------------ model weights

def weights_fingerprint(name_or_path: str, hub_commit: str = "") -> str:
    """What identifies the policy's weights (``providers.weights_id``: a named Base's own id, a local folder's
    file contents, or a hub model's name and its pinned commit)."""
    register_all()
    return providers.weights_id(name_or_path, hub_commit)


# Values hashed through the weights fingerprint instead of the parameters, so that leaving them unset keeps every
# key as it was before they existed.
WEIGHTS_VALUES = {"model": ("hub_commit",)}
# Counts of workers, which change no number (the engine's units have fixed thread counts): out of every key. Where
# RL runs train (the notebook's process or the engine's one-thread units) changes their numbers, so it stays; an
# SFT unit trains at the notebook's threads, so where SFT runs train is out too.
COUNT_VALUES = {"model": ("generation_workers",), "rl": ("workers",), "sft": ("workers",)}


def hashed_params(profile, sections) -> dict:
    """{declared value: plain data} as the key hashes it, without ``WEIGHTS_VALUES`` and ``COUNT_VALUES`` (``rl``
    says ``runs_on_engine`` instead of ``workers``) and with ``model.warmup`` as ``model.warmup.keyed_warmup``
    gives it."""
    from edit_lib.config import to_dict
    from edit_lib.model.warmup import keyed_warmup
    out = {}
    for s in sections:
        v = profile.section(s)
        if isinstance(v, dict):
            v = {k: x for k, x in v.items() if k not in WEIGHTS_VALUES.get(s, ()) + COUNT_VALUES.get(s, ())}
        if s == "rl" and isinstance(v, dict):
            v["runs_on_engine"] = profile.rl.workers != 1
        if s == "model" and isinstance(v, dict):
            v["warmup"] = to_dict(keyed_warmup(profile.model.warmup))
        out[s] = v
    return out


def data_fingerprint(profile) -> dict[str, str]:
    """{dataset: hash of the contents of the files it is read from} for real-data sources, so a data file
    edited in place re-runs 00_data (the profile only names the path)."""
    from edit_lib.data.registry import input_paths

    out = {}
    for spec in profile.data.datasets:
        paths = input_paths(spec)
        if paths:
            out[spec.name] = short_hash([path_digest(p) for p in paths])
    return out


# ------------------------------------------------------------------ keys

def stage_inputs(profile, name: str, notebook_dir: Path, memo: dict | None = None) -> tuple[str, dict]:
    """(key, inputs) of stage ``name`` under ``profile`` (a real ``config.Profile``). ``memo`` caches the
    keys of upstream stages and the weights fingerprint within one call of the runner."""
    memo = {} if memo is None else memo
    if name not in memo:
        st = STAGES[name]
        ups = {u: stage_inputs(profile, u, notebook_dir, memo)[0] for u in st.upstream
               if (notebook_dir / f"{u}.ipynb").exists()}
        inputs = dict(params=hashed_params(profile, st.sections), upstream=ups,
                      modules=module_fingerprints(notebook_dir / f"{name}.ipynb", profile, name), weights=None)
        if any(s == "data" or s.startswith("data.") for s in st.sections):
            inputs["data_files"] = data_fingerprint(profile)
        if st.loads_model:
            wkey = ("weights", profile.model.name_or_path, profile.model.hub_commit)
            if wkey not in memo:
                memo[wkey] = weights_fingerprint(profile.model.name_or_path, profile.model.hub_commit)
            inputs["weights"] = memo[wkey]
        memo[name] = (short_hash(inputs), inputs)
    return memo[name]


def leaf_diff(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the leaf values that differ; list items that carry a ``name`` are addressed by it
    (``data.datasets.synth_sas.options.n_questions``, as ``-p`` overrides are)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            p = f"{prefix}.{k}" if prefix else str(k)
            if k not in old or k not in new:
                out.append(p)
            else:
                out += leaf_diff(old[k], new[k], p)
        return out
    if isinstance(old, list) and isinstance(new, list):
        def named(xs):
            names = [x.get("name") for x in xs if isinstance(x, dict)]
            ok = len(names) == len(xs) and all(isinstance(n, str) for n in names) and len(set(names)) == len(xs)
            return dict(zip(names, xs)) if ok else None
        a, b = named(old), named(new)
        if a is not None and b is not None:
            return leaf_diff(a, b, prefix)
        if len(old) == len(new):
            return [q for i, (x, y) in enumerate(zip(old, new)) for q in leaf_diff(x, y, f"{prefix}.{i}")]
    return [] if old == new else [prefix]


def at_path(obj: Any, path: str, missing: Any = None) -> Any:
    """The value at a ``leaf_diff`` path (dict keys may hold dots, as ``run.seed`` does; list items by name or
    index), ``missing`` where there is none."""
    if path == "":
        return obj
    if isinstance(obj, dict):
        for k in sorted(obj, key=lambda k: -len(str(k))):
            if path == str(k) or path.startswith(f"{k}."):
                return at_path(obj[k], path[len(str(k)) + 1:], missing)
    elif isinstance(obj, list):
        head, _, rest = path.partition(".")
        named = [x for x in obj if isinstance(x, dict) and x.get("name") == head]
        if len(named) == 1:
            return at_path(named[0], rest, missing)
        if head.isdigit() and int(head) < len(obj):
            return at_path(obj[int(head)], rest, missing)
    return missing


def why(recorded: dict | None, inputs: dict) -> list[tuple[str, Any]]:
    """Why a stage with these ``inputs`` must run, given its recorded results JSON (empty: up to date as far
    as its inputs go). Each reason is (kind, detail): ('new', None), ('parameters', [dotted keys]),
    ('upstream', stage), ('library', [files]), ('weights', None), ('data', [datasets]), ('recorded', message)."""
    if recorded is None:
        return [("new", None)]
    rec = recorded.get("inputs")
    if not isinstance(rec, dict):
        return [("recorded", "results were recorded without the inputs of their key (older runner)")]
    out: list[tuple[str, Any]] = []

    def changed(old: dict, new: dict) -> list:
        return [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    # compared as JSON, as the key hashes them (a tuple default equals the list the results JSON recorded)
    params = leaf_diff(as_json(rec.get("params", {})), as_json(inputs["params"]))
    if params:
        out.append(("parameters", params))
    out += [("upstream", u) for u in changed(rec.get("upstream", {}), inputs["upstream"])]
    mods = changed(rec.get("modules", {}), inputs["modules"])
    if mods:
        out.append(("library", mods))
    if rec.get("weights") != inputs["weights"]:
        out.append(("weights", None))
    data = changed(rec.get("data_files", {}), inputs.get("data_files", {}))
    if data:
        out.append(("data", data))
    return out


def describe_reason(kind: str, detail: Any) -> str:
    """One reason as the runner prints it."""
    if kind == "parameters":
        return "parameters changed: " + ", ".join(detail)
    if kind == "upstream":
        return f"upstream {detail} changed"
    if kind == "library":  # the results JSON keeps every file; the log names the first few
        more = f" and {len(detail) - 4} more" if len(detail) > 5 else ""
        return "library changed: " + ", ".join(detail[:4] if more else detail) + more
    if kind == "weights":
        return "model weights changed"
    if kind == "data":
        return "data files changed: " + ", ".join(detail)
    return kind if detail is None else str(detail)


# ------------------------------------------------------------------ what a notebook may read

class UndeclaredSectionError(RuntimeError):
    """A notebook read a profile value that its stage's key does not cover."""


def _allows(declared: tuple[str, ...], path: str) -> str:
    """'all' (path is declared or inside a declared section), 'part' (something below it is declared), ''."""
    if any(path == d or path.startswith(d + ".") for d in declared):
        return "all"
    return "part" if any(d.startswith(path + ".") for d in declared) else ""


class ProfileView:
    """Read-only view of a profile for one stage: a declared section returns the real dataclass (so library
    functions get ordinary config objects), a partly declared one (``run`` for ``run.seed``) returns a view,
    anything else raises ``UndeclaredSectionError`` naming the stage, the value and where to declare it."""

    _ALWAYS = ("name", "ops")  # ops: how a run is watched and saved, in no key (config/schema.py)

    def __init__(self, obj: Any, stage: str, declared: tuple[str, ...], prefix: str = ""):
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_stage", stage)
        object.__setattr__(self, "_declared", tuple(declared))
        object.__setattr__(self, "_prefix", prefix)

    def __reduce__(self):  # the engine's units (rl.workers) get the same view
        return ProfileView, (self._obj, self._stage, self._declared, self._prefix)

    def replace(self, **sections) -> "ProfileView":
        """The same view over ``dataclasses.replace(profile, **sections)``; only declared sections may change."""
        for name in sections:
            getattr(self, name)  # raises for an undeclared section
        return ProfileView(dataclasses.replace(self._obj, **sections), self._stage, self._declared, self._prefix)

    def __getattr__(self, attr: str) -> Any:
        obj = object.__getattribute__(self, "_obj")
        fields = {f.name for f in dataclasses.fields(obj)}
        if attr not in fields:
            raise AttributeError(f"{type(obj).__name__} has no field {attr!r}")
        if not self._prefix and attr in self._ALWAYS:
            return getattr(obj, attr)
        return self._read(self._prefix + attr, getattr(obj, attr))

    def _read(self, path: str, value: Any) -> Any:
        allow = _allows(self._declared, path)
        if allow == "all":
            return value
        if allow == "part" and dataclasses.is_dataclass(value):
            return ProfileView(value, self._stage, self._declared, path + ".")
        raise UndeclaredSectionError(
            f"notebook {self._stage} read profile value '{path}', which its stage does not declare "
            f"(declared: {', '.join(self._declared)}). Add '{path}' (or its section) to the sections of "
            f"Stage('{self._stage}', ...) in edit_lib/runner/keys.py so that the stage's key covers it and changing "
            f"it re-runs the stage.")

    def section(self, dotted: str) -> Any:
        """``Profile.section`` (plain data at a dotted path) for declared values only."""
        node: Any = self
        for part in dotted.split("."):
            node = getattr(node, part)
        if isinstance(node, ProfileView):  # only part of it is declared
            node._read(node._prefix.rstrip("."), None)
        return dataclasses.asdict(node) if dataclasses.is_dataclass(node) else node

    def __setattr__(self, attr: str, value: Any) -> None:
        raise AttributeError(f"the profile of notebook {self._stage} is read-only ({attr!r})")

    def __repr__(self) -> str:
        label = self._prefix.rstrip(".") or "profile"
        return f"<{label} of notebook {self._stage}: may read {', '.join(self._declared)}>"


#: Environment variables that cap the instruction set of a kernel library (each recorded when set).
# ---------------------------------------------------------------- the floating-point setting (numerics)

ISA_ENV = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


def numerics() -> dict:
    """{torch, cpu_capability, processor, machine, torch_threads, isa_env} of this process (torch imported)."""
    import torch

    return dict(torch=torch.__version__, cpu_capability=torch.backends.cpu.get_cpu_capability(),
                processor=platform.processor() or "unknown", machine=platform.machine(),
                torch_threads=torch.get_num_threads(),
                isa_env={k: os.environ[k] for k in ISA_ENV if k in os.environ})


def numerics_differ(results_a: dict[str, dict], results_b: dict[str, dict]) -> list[dict]:
    """The stages of both runs whose recorded ``numerics`` differ: [{stage, field, a, b}], one entry per field
    (a results JSON written before this record existed counts as unknown, not as different)."""
    out = []
    for stage in sorted(set(results_a) & set(results_b)):
        na, nb = results_a[stage].get("numerics"), results_b[stage].get("numerics")
        if not isinstance(na, dict) or not isinstance(nb, dict):
            continue
        out += [dict(stage=stage, field=f, a=na.get(f), b=nb.get(f))
                for f in sorted(set(na) | set(nb)) if na.get(f) != nb.get(f)]
    return out


def numerics_note(entries: list[dict]) -> list[str]:
    """The lines that name what differs in two runs' kernels (``numerics_differ``), one per field and values, with
    the stages, then an empty line; no entries: no lines."""
    if not entries:
        return []
    by: dict[tuple, list[str]] = {}
    for e in entries:
        by.setdefault((e["field"], json.dumps(e["a"]), json.dumps(e["b"])), []).append(e["stage"])
    return (["The runs' numerics differ (floats may move in their last digits from this alone; "
             "book/records/performance.md):"]
            + [f"  {f}: {_show(a)} -> {_show(b)}   ({', '.join(st)})" for (f, a, b), st in by.items()] + [""])


def _show(dumped: str) -> str:
    value = json.loads(dumped)
    return value if isinstance(value, str) else dumped

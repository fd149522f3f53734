"""Run directories, artifact keys and the results JSON of each notebook (DESIGN.md §4).

``runs/<profile>/`` holds ``artifacts/<stage>/<key>/`` (tables, datasets, adapters), ``results/<stage>.json``
(every number a table or figure shows), ``figures/`` and the executed ``notebooks/``. A stage's key hashes
the profile sections it reads plus its upstream stages' keys, so an unchanged stage is not recomputed.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

DEFAULT_RUN_ROOT = Path(os.environ.get("EDIT_RUN_ROOT", Path(__file__).resolve().parents[1] / "runs"))


class MissingArtifactError(FileNotFoundError):
    """An upstream artifact is absent: the message names the notebook that makes it."""


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @classmethod
    def for_profile(cls, profile: str, run_root: str | Path | None = None) -> "RunPaths":
        return cls(Path(run_root or DEFAULT_RUN_ROOT) / profile)

    @property
    def artifacts(self) -> Path:
        return self.root / "artifacts"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    def stage_dir(self, stage: str, key: str) -> Path:
        return self.artifacts / stage / key

    def results_file(self, stage: str) -> Path:
        return self.results / f"{stage}.json"


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        f = float(x)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, Path):
        return str(x)
    return x


def table_rows(df: pd.DataFrame | list[dict]) -> list[dict]:
    """Rows of a table as plain JSON objects (NaN -> null)."""
    rows = df.to_dict(orient="records") if isinstance(df, pd.DataFrame) else list(df)
    return _jsonable(rows)


def write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(_jsonable(payload), indent=2, sort_keys=True, ensure_ascii=False))
    tmp.replace(path)  # atomic: a crashed run never leaves half a results file


def read_results(paths: RunPaths, stage: str) -> dict:
    f = paths.results_file(stage)
    if not f.exists():
        raise MissingArtifactError(f"{f} is missing: run notebook {stage} first "
                                   f"(edit-suite run --profile {paths.root.name} --only {stage})")
    return json.loads(f.read_text())

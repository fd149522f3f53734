"""The paper's reference numbers (edit_lib/paper_reference.csv): shape, uniqueness, names and spot values."""
from __future__ import annotations

import pytest

from edit_lib import paper_reference as pr

EXPECTED_COUNTS = {
    "Table 1": 4 * 4 * 7,        # subjects (incl. SAS-Avg) x metrics x systems
    "Table 2": 2 * 2 * 4 * 7,    # subjects x splits x metrics x systems
    "Table 3": 7 * 3 + 6 * 2,    # QWK + CI for all; delta and Holm p for the six non-Base systems
    "Table 4": 2 * 7,            # per dataset: mean/SD x 2 arms, delta, delta CI low/high
    "Table 5": 5 * 4,
    "Table 6": 4 * 4,
    "Table 7": 7 * 5,
    "Table 8": 2 * (3 * 2 + 2) + 3 * (2 * 2 + 2),  # resp and q per split, lowest and highest M_q
    "App. B": 5 + 10,            # Private-Biology compute budget paragraph: pool bookkeeping; GPU-hours, step
                                 # seconds and probe boundaries (the dry run's time estimate sets these beside)
    "Table 9": 5 * 2,            # lower block: beta_drift and gamma_Phi per dataset
    "Table 12": 2 * 3 * 2,       # datasets x selection rules x (Success@4, Retention)
    "Table 13": 3 * 3,
    "Table 14": 7 * 6 * 2,
    "Sec. 3.2": 2,               # "two to three times larger" (on Table 3): the range's two ends
}
KEY = ["table", "dataset", "subject", "split", "metric", "system"]
CONDITIONS = ["lor_a1", "lor_a2", "lor_b1", "pts_x0.5", "pts_x1.5", "pts_x2.0"]
METRICS = (
    {"acc", "within1", "mae", "qwk"}
    | {"qwk_question_pooled", "ci_low", "ci_high", "delta_vs_base", "holm_p"}
    | {"qwk_mean", "qwk_sd", "delta", "delta_ci_low", "delta_ci_high"}
    | {"zero_recall_pct"}
    | {"gain_ratio_low", "gain_ratio_high"}
    | {"success_at_4_pct", "retention_pct"}
    | {"beta_drift", "gamma"}
    | {"responses", "questions", "max_mark_min", "max_mark_max"}
    | {"incorrect_rollouts", "pool_size", "golden_rollouts", "revisions"}
    | {"gpu_hours_probe", "gpu_hours_audit_selection", "gpu_hours_revisions", "gpu_hours_phase1", "gpu_hours_rl",
       "step_seconds", "probe_read_seconds", "probe_boundaries_mean"}
    | {"ae_rsr_lor", "floor_rate_pct_lor", "ae_rsr_pts", "floor_rate_pct_pts", "ae_rsr_overall"}
    | {f"{m}:{c}" for m in ("floor_rate_pct", "ib_rsr") for c in CONDITIONS}
)
SYSTEMS = {"base", "base_grpo", "base_dgpo", "int_sft", "int_sft_int_rl", "edit_sft", "edit_sft_edit_rl",
           "base_edit_rl", "edit_sft_grpo", "wo_localiser", "wo_checklist", "wo_atomic",
           "random", "belief_shift_only", "edit"}  # Table 12's selection rules


@pytest.fixture(scope="module")
def df():
    return pr.load()


def test_loads_with_the_expected_columns_and_dtypes(df):
    assert list(df.columns) == pr.COLUMNS
    assert df["value"].dtype == float
    assert not df.isna().any().any()
    for c in pr.COLUMNS:
        if c != "value":
            assert all(isinstance(x, str) for x in df[c]), c


def test_row_counts_per_table(df):
    assert df["table"].value_counts().to_dict() == EXPECTED_COUNTS


def test_keys_are_unique(df):
    dup = df[df.duplicated(KEY, keep=False)]
    assert dup.empty, dup


def test_every_row_cites_its_source(df):
    assert (df["cite"].str.strip() != "").all()
    assert all(c.startswith(t) for t, c in zip(df["table"], df["cite"]))


def test_metric_and_system_names_are_known(df):
    assert set(df["metric"]) <= METRICS, set(df["metric"]) - METRICS
    results = df[df["table"] != "Table 8"]  # Table 8 describes data: no system
    assert set(results["system"]) <= SYSTEMS | {""}, set(results["system"]) - SYSTEMS
    assert set(df.loc[df["table"] == "Table 8", "system"]) == {""}


@pytest.mark.parametrize("kwargs, expected", [
    (dict(table="Table 1", metric="qwk", system="edit_sft_edit_rl", subject="Physics"), 0.729),
    (dict(table="Table 1", metric="mae", system="base", subject="SAS-Avg"), 1.950),
    (dict(table="Table 2", metric="qwk", system="edit_sft_edit_rl", subject="Biology", split="ood"), 0.575),
    (dict(table="Table 2", metric="acc", system="int_sft_int_rl", subject="Physics", split="id"), 0.512),
    (dict(table="Table 3", metric="holm_p", system="base_dgpo"), 0.021),
    (dict(table="Table 3", metric="holm_p", system="edit_sft"), 0.0006),
    (dict(table="Table 4", metric="delta", system="edit_sft_edit_rl", dataset="Private-Biology"), 0.021),
    (dict(table="Table 4", metric="delta_ci_low", system="edit_sft_edit_rl", dataset="SAS-History"), -0.007),
    (dict(table="Table 4", metric="qwk_mean", system="edit_sft_grpo", dataset="SAS-History"), 0.873),
    (dict(table="Table 5", metric="qwk", system="base_edit_rl", split="ood"), 0.518),
    (dict(table="Table 6", metric="mae", system="wo_checklist"), 2.346),
    (dict(table="Table 7", metric="floor_rate_pct_lor", system="base"), 10.07),
    (dict(table="Table 8", metric="responses", system="", subject="Biology", split="train"), 10159),
    (dict(table="Table 8", metric="questions", system="", subject="History", split="ood"), 26),
    (dict(table="Table 8", metric="max_mark_max", system="", subject="Physics", dataset="SAS"), 20),
    (dict(table="App. B", metric="revisions", system="edit_sft"), 22637),
    (dict(table="App. B", metric="gpu_hours_probe", system="edit_sft"), 2.5),
    (dict(table="App. B", metric="gpu_hours_phase1", system="int_sft"), 8.0),
    (dict(table="App. B", metric="gpu_hours_rl", system="edit_sft_edit_rl"), 1.9),
    (dict(table="App. B", metric="step_seconds", system="edit_sft_grpo"), 12.0),
    (dict(table="App. B", metric="probe_boundaries_mean", system=""), 5.2),
    (dict(table="Table 13", metric="zero_recall_pct", system="int_sft", subject="Physics"), 0.0),
    (dict(table="Table 14", metric="ib_rsr:pts_x2.0", system="int_sft"), 0.20),
    (dict(table="Table 14", metric="floor_rate_pct:lor_a2", system="base"), 12.3),
])
def test_spot_values(kwargs, expected):
    assert pr.value(**kwargs) == pytest.approx(expected, abs=1e-12)


def test_table_returns_one_table_and_rejects_unknown_names():
    t = pr.table("Table 6")
    assert len(t) == 16 and set(t["table"]) == {"Table 6"}
    with pytest.raises(KeyError, match="Table 1"):
        pr.table("Table 10")


def test_value_errors_on_no_match_and_on_ambiguity():
    with pytest.raises(LookupError, match="no reference value"):
        pr.value("Table 1", "qwk", "wo_atomic")
    with pytest.raises(LookupError, match="narrow"):
        pr.value("Table 1", "qwk", "base")

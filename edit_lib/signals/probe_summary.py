"""Summaries of the probe tables that notebook 02 records (Eq. 1-2): each a tested function of the tables.

* ``step_count_summary``: how many rollouts have T <= 1 steps (Sec. 2.1), where the probe has one delta-eps;
* ``final_agreement``: does the probe at k = T agree with the mark the policy wrote?
* ``trajectory_by_position``: mean |m-hat_k - m*| / M_q by binned relative position u = k/T;
* ``delta_eps_summary`` / ``delta_eps_histogram``: per-step belief shifts delta-eps_k (Eq. 2);
* ``example_rollouts``: the trajectories 02 draws (the most harmful single steps, and correct ones);
* ``compare_reads``: the next-token read of Eq. 1 against the digits+terminator sequence read, on the same
  boundaries (total variation, expected mark, and the step with the most negative delta-eps).

Probe tables are ``tables.probe_table`` output (one row per rollout and boundary k = 0..T), merged with the
rollout columns a summary names (``correct``, ``mark``, ``max_mark``, ``parse_status``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

KEYS = ["dataset", "response_id", "rollout_id"]


def need_columns(df: pd.DataFrame, cols, what: str) -> None:
    """ValueError naming ``what`` and the columns of ``cols`` that ``df`` lacks (its columns listed)."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} needs column(s) {missing}; got {list(df.columns)}")


def step_count_summary(rollouts: pd.DataFrame) -> pd.DataFrame:
    """Per dataset: rollouts, how many have T <= 1 steps (Sec. 2.1: G^p is then 0 and there is one delta-eps)
    and T = 0, their shares, the mean and median T, and the segmentation rules applied (``step_rule``)."""
    need_columns(rollouts, ["dataset", "n_steps"], "step_count_summary")
    rows = []
    for name, g in rollouts.groupby("dataset", sort=False):
        t = g["n_steps"].to_numpy()
        rules = g["step_rule"].value_counts().to_dict() if "step_rule" in g else {}
        rows.append(dict(dataset=name, rollouts=len(g), single_step=int((t <= 1).sum()),
                         single_step_share=float((t <= 1).mean()), no_step=int((t == 0).sum()),
                         mean_steps=float(t.mean()), median_steps=float(np.median(t)),
                         rules=", ".join(f"{k}: {v}" for k, v in sorted(rules.items()))))
    return pd.DataFrame(rows, columns=["dataset", "rollouts", "single_step", "single_step_share", "no_step",
                                       "mean_steps", "median_steps", "rules"])


def single_step_warnings(counts: pd.DataFrame, threshold: float) -> list[str]:
    """One message per dataset whose share of T <= 1 rollouts exceeds ``threshold`` (steps.warn_single_step_share)."""
    return [f"{r.dataset}: {r.single_step} of {r.rollouts} rollouts ({r.single_step_share:.0%}) have T <= 1 "
            f"reasoning steps (above steps.warn_single_step_share = {threshold:g}); the probe then has a single "
            f"delta-eps per rollout: check the segmentation rule (steps.rule) and the grader's output format"
            for r in counts.itertuples() if r.single_step_share > threshold]


def final_agreement(beliefs: pd.DataFrame) -> pd.DataFrame:
    """At k = T the scaffold is the policy's own final line: per dataset, how often the probe's argmax is the
    mark it wrote, the mean probability of that mark and the mean |m-hat_T - mark|. Rollouts without a parsed
    mark are counted in ``unparsed`` and left out of the means."""
    need_columns(beliefs, ["dataset", "k", "n_steps", "argmax", "expected", "probs", "mark", "parse_status"],
          "final_agreement")
    final = beliefs[beliefs["k"] == beliefs["n_steps"]]
    rows = []
    for name, g in final.groupby("dataset", sort=False):
        ok = g[g["parse_status"] == "ok"]
        mark = ok["mark"].astype(int).to_numpy()
        p_gen = np.array([p[m] for p, m in zip(ok["probs"], mark)], dtype=float)
        rows.append(dict(dataset=name, rollouts=len(ok), unparsed=len(g) - len(ok),
                         argmax_agrees=float(np.mean(ok["argmax"].to_numpy() == mark)) if len(ok) else np.nan,
                         mean_p_of_generated=float(p_gen.mean()) if len(ok) else np.nan,
                         mean_abs_expected_minus_generated=float(np.abs(ok["expected"].to_numpy() - mark).mean())
                         if len(ok) else np.nan))
    return pd.DataFrame(rows, columns=["dataset", "rollouts", "unparsed", "argmax_agrees", "mean_p_of_generated",
                                       "mean_abs_expected_minus_generated"])


def trajectory_by_position(beliefs: pd.DataFrame, n_bins: int = 5) -> pd.DataFrame:
    """Mean relative belief error |m-hat_k - m*| / M_q (Eq. 2) by relative position u = k/T in ``n_bins``
    equal-width bins over [0, 1] (u = 1 falls in the last bin), per dataset and correct/incorrect rollout."""
    need_columns(beliefs, ["dataset", "correct", "u", "eps", "max_mark"], "trajectory_by_position")
    b = np.minimum((beliefs["u"].to_numpy() * n_bins).astype(int), n_bins - 1)
    d = beliefs.assign(u_bin=b, rel_eps=beliefs["eps"] / beliefs["max_mark"])
    out = (d.groupby(["dataset", "correct", "u_bin"]).agg(n=("rel_eps", "size"), mean_rel_eps=("rel_eps", "mean"))
           .reset_index())
    out["u_mid"] = (out["u_bin"] + 0.5) / n_bins
    return out[["dataset", "correct", "u_bin", "u_mid", "n", "mean_rel_eps"]]


def delta_eps_summary(beliefs: pd.DataFrame, tie_margin: float) -> pd.DataFrame:
    """Per dataset and correct/incorrect: number of steps, mean and min delta-eps_k (Eq. 2) and the share of
    harmful steps (delta-eps_k < -tie_margin: the step moved the belief away from gold)."""
    need_columns(beliefs, ["dataset", "correct", "delta_eps"], "delta_eps_summary")
    d = beliefs.dropna(subset=["delta_eps"])
    return (d.groupby(["dataset", "correct"])
            .agg(steps=("delta_eps", "size"), mean_delta_eps=("delta_eps", "mean"),
                 share_harmful=("delta_eps", lambda x: float((x < -tie_margin).mean())),
                 min_delta_eps=("delta_eps", "min")).reset_index())


def delta_eps_histogram(beliefs: pd.DataFrame, width: float = 0.1) -> pd.DataFrame:
    """Histogram of delta-eps_k (Eq. 2) for correct vs incorrect rollouts: bins of ``width`` centred on
    multiples of it, with counts and the share within each group (what ``plots.delta_eps_hist`` draws)."""
    need_columns(beliefs, ["correct", "delta_eps"], "delta_eps_histogram")
    d = beliefs.dropna(subset=["delta_eps"])
    centre = np.round(d["delta_eps"].to_numpy() / width) * width
    out = d.assign(bin=np.round(centre, 10)).groupby(["correct", "bin"]).size().rename("count").reset_index()
    out["share"] = out["count"] / out.groupby("correct")["count"].transform("sum")
    return out


def _worst_steps(beliefs: pd.DataFrame) -> pd.Series:
    """Per rollout: the step k with the most negative delta-eps_k (the first on ties)."""
    d = beliefs.dropna(subset=["delta_eps"]).sort_values(KEYS + ["k"])
    return d.loc[d.groupby(KEYS, sort=False)["delta_eps"].idxmin()].set_index(KEYS)["k"]


def read_boundaries(next_token: pd.DataFrame, sequence: pd.DataFrame) -> pd.DataFrame:
    """The two probe reads of Eq. 1 on the same boundaries: per (rollout, k) the total-variation distance
    0.5 * sum_m |p_next(m) - p_seq(m)| and the expected-mark difference m-hat_next - m-hat_seq (Eq. 2)."""
    cols = KEYS + ["k", "n_steps", "probs", "expected", "delta_eps", "read"]
    need_columns(next_token, cols, "read_boundaries (next_token table)")
    need_columns(sequence, cols, "read_boundaries (sequence table)")
    m = next_token[cols].merge(sequence[cols], on=KEYS + ["k"], suffixes=("_next", "_seq"), how="outer",
                               indicator=True)
    if (m["_merge"] != "both").any():
        bad = m.loc[m["_merge"] != "both", KEYS + ["k"]].head(3).to_dict("records")
        raise ValueError(f"the two probe tables cover different boundaries, e.g. {bad}")
    m["tv"] = [0.5 * float(np.abs(np.asarray(a) - np.asarray(b)).sum()) for a, b in zip(m["probs_next"],
                                                                                          m["probs_seq"])]
    m["d_expected"] = m["expected_next"] - m["expected_seq"]
    return m.rename(columns={"n_steps_next": "n_steps", "read_next": "read"})[
        KEYS + ["k", "n_steps", "read", "tv", "expected_next", "expected_seq", "d_expected",
                "delta_eps_next", "delta_eps_seq"]]


def compare_reads(next_token: pd.DataFrame, sequence: pd.DataFrame) -> pd.DataFrame:
    """Next-token read (Eq. 1) vs sequence read, per dataset and the read the next-token table actually used
    ('sequence' where marks span several tokens, so both tables agree there): boundaries, mean / max TV, mean
    and max |expected-mark difference|, and among rollouts with T >= 2 how often the step with the most
    negative delta-eps (Eq. 2; Alg. 1 shortlists from these) differs between the reads."""
    per = read_boundaries(next_token, sequence)
    w_next = _worst_steps(next_token)
    w_seq = _worst_steps(sequence)
    worst = pd.DataFrame({"worst_next": w_next, "worst_seq": w_seq}).reset_index()
    per_rollout = (per.groupby(KEYS, sort=False).agg(n_steps=("n_steps", "first"), read=("read", "first"))
                   .reset_index().merge(worst, on=KEYS, how="left"))
    per_rollout["multi"] = per_rollout["n_steps"] >= 2
    per_rollout["changed"] = per_rollout["multi"] & (per_rollout["worst_next"] != per_rollout["worst_seq"])
    rows = []
    for (name, read), g in per.groupby(["dataset", "read"], sort=False):
        r = per_rollout[(per_rollout["dataset"] == name) & (per_rollout["read"] == read)]
        n_multi = int(r["multi"].sum())
        rows.append(dict(dataset=name, read_used=read, rollouts=len(r), boundaries=len(g),
                         mean_tv=float(g["tv"].mean()), max_tv=float(g["tv"].max()),
                         mean_abs_d_expected=float(g["d_expected"].abs().mean()),
                         max_abs_d_expected=float(g["d_expected"].abs().max()),
                         mean_d_expected=float(g["d_expected"].mean()),
                         rollouts_T_ge_2=n_multi, worst_step_changed=int(r["changed"].sum()),
                         worst_step_changed_share=float(r["changed"].sum() / n_multi) if n_multi else np.nan))
    return pd.DataFrame(rows)


def example_rollouts(beliefs: pd.DataFrame, n_worst: int = 3, n_correct: int = 2) -> pd.DataFrame:
    """Belief trajectories to show (Fig. 1 style): the ``n_worst`` rollouts holding the most negative single
    delta-eps_k (Eq. 2) and the first ``n_correct`` correct rollouts for contrast; every boundary of each, with
    ``k``, ``expected``, ``gold`` and ``correct``."""
    need_columns(beliefs, KEYS + ["k", "expected", "gold", "correct", "delta_eps"], "example_rollouts")
    worst = (beliefs.dropna(subset=["delta_eps"]).sort_values(["delta_eps"] + KEYS, kind="stable")
             .drop_duplicates(KEYS).head(n_worst)[KEYS])
    good = beliefs[beliefs["correct"].astype(bool)].drop_duplicates(KEYS).head(n_correct)[KEYS]
    chosen = pd.concat([worst, good]).drop_duplicates()
    return (beliefs.merge(chosen, on=KEYS)[KEYS + ["k", "expected", "gold", "correct"]]
            .sort_values(KEYS + ["k"]).reset_index(drop=True))

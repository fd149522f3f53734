"""Behaviour of a policy's grading text against the synthetic world's ground truth.

A completion in the teacher's format (§3 rollout; `edit_lib.embedded.teacher`) is parsed structurally: grounding steps
"point i <text> ; answer <copied sentence or none> ; <verdict> ; credit c", synthesis steps (total / count,
cap, round, level, mark) and the final line. Each judgement is set against the point's Coverage status, which
measures the paper's failure types on the policy itself (Fig. 1 wording mismatch, credited misconceptions,
credit-synthesis and band errors), plus quote faithfulness and whether the final mark follows the chain.

Model output comes back in the tokenizer's canonical spaced form ("credit 1 . 5"); both completion and answer
are canonicalised before any comparison, so the written and the decoded form give the same result.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from edit_lib.data.schema import Dataset, LevelScheme, PointsScheme, Question, round_half_up
from edit_lib.data.synthetic import ABSENT, COVERED_STATUSES, MARKED_PARAPHRASE, MISCONCEPTION, PARAPHRASE, STATUSES
from edit_lib.prompts.grading import read_final_mark, split_steps
from edit_lib.embedded.teacher import CREDIT_MISCONCEPTION, MISCOUNT, WORDING_MISMATCH, WRONG_BAND, ErrorModel
from edit_lib.embedded.tokenizer import canonicalize

_NUM = r"\d(?: ?\d)*(?: ?\. ?\d(?: ?\d)*)?"
_POINT = re.compile(rf"^point ({_NUM})\b ?(.*)$")
_SUM = re.compile(rf"^(total|count) (.*?)= ?({_NUM})")
_CAP = re.compile(rf"^capped at ({_NUM})")
_ROUND = re.compile(rf"^round ({_NUM}) to ({_NUM})")
_LEVEL = re.compile(rf"^level ({_NUM})\b(.*?)(?:; band ({_NUM}) to ({_NUM}))?$")
_MARK = re.compile(rf"^mark ({_NUM})(?: \+ ({_NUM}) x ({_NUM}) = ({_NUM}))?(?: capped at ({_NUM}))?")


def _num(s: str | None) -> float | None:
    if s is None:
        return None
    try:
        return float(re.sub(r"\s+", "", s))
    except ValueError:
        return None


def _contains(haystack: str, needle: str) -> bool:
    """Word-for-word containment of canonical texts (token boundaries respected)."""
    return bool(needle) and f" {needle} " in f" {haystack} "


@dataclass
class Judgement:
    point: int  # 1-based point index as written
    text: str = ""
    quote: str | None = None  # None: the step has no answer field
    verdict: str | None = None
    credit: float | None = None


@dataclass
class ParsedChain:
    """One completion split into grounding judgements, synthesis values and the final mark."""

    judgements: list[Judgement] = field(default_factory=list)
    sum_kind: str | None = None  # total | count
    sum_terms: list[float] = field(default_factory=list)
    sum_value: float | None = None
    cap: float | None = None
    rounded: float | None = None
    level: int | None = None
    band: tuple[float, float] | None = None
    mark_step: float | None = None  # the value the last mark/total step ends on
    other_steps: int = 0


def parse_chain(completion: str) -> ParsedChain:
    """Parse a grading completion in the teacher's step format (written or canonical form)."""
    out = ParsedChain()
    for body in split_steps(canonicalize(completion)):
        body = body.strip()
        m = _POINT.match(body)
        if m:
            idx = _num(m.group(1))
            parts = [p.strip() for p in m.group(2).split(" ; ")]
            j = Judgement(point=int(idx) if idx is not None and idx.is_integer() else -1, text=parts[0])
            for p in parts[1:]:
                if p.startswith("answer"):
                    j.quote = p[len("answer"):].strip()
                elif p.startswith("credit"):
                    j.credit = _num(p[len("credit"):])
                elif j.verdict is None:
                    j.verdict = p
            out.judgements.append(j)
            continue
        if m := _SUM.match(body):
            out.sum_kind = m.group(1)
            out.sum_terms = [v for v in (_num(t) for t in m.group(2).split("+")) if v is not None]
            out.sum_value = out.mark_step = _num(m.group(3))
        elif m := _CAP.match(body):
            out.cap = out.mark_step = _num(m.group(1))
        elif m := _ROUND.match(body):
            out.rounded = out.mark_step = _num(m.group(2))
        elif m := _LEVEL.match(body):
            out.level = int(_num(m.group(1)) or 0)
            if m.group(3) is not None:
                out.band = (_num(m.group(3)), _num(m.group(4)))
        elif m := _MARK.match(body):
            vals = [_num(g) for g in m.groups()]
            out.mark_step = vals[4] if vals[4] is not None else (vals[3] if vals[3] is not None else vals[0])
        else:
            out.other_steps += 1
    return out


def _scheme_mark(q: Question, credited: list[bool], credits: list[float]) -> int:
    """The mark the scheme gives to the credits a chain wrote (exact synthesis of its own judgements)."""
    s = q.scheme
    if isinstance(s, LevelScheme):
        lv = s.level_of(sum(credited))
        return 0 if lv is None else min(lv.high, lv.low + lv.step * (sum(credited) - lv.min_points))
    total = sum(credits)
    if isinstance(s, PointsScheme) and s.cap is not None:
        total = min(total, s.cap)
    return min(round_half_up(total), q.max_mark)


def _wrong_band(q: Question, chain: ParsedChain, count: float) -> bool | None:
    """LoR only: the level (or band) written is not the one the written count reaches."""
    if not isinstance(q.scheme, LevelScheme) or chain.level is None:
        return None
    lv = q.scheme.level_of(int(count))
    if chain.level != (0 if lv is None else lv.level):
        return True
    return chain.band is not None and lv is not None and chain.band != (float(lv.low), float(lv.high))


def analyse_completion(q: Question, response, completion: str) -> tuple[list[dict], dict]:
    """Per-point rows and one rollout row for a completion on a synthetic response (with coverage)."""
    chain = parse_chain(completion)
    answer = canonicalize(response.answer)
    first: dict[int, Judgement] = {}
    for j in chain.judgements:
        first.setdefault(j.point, j)
    rows = []
    for i, (p, cov) in enumerate(zip(q.scheme.points, response.coverage), start=1):
        j = first.get(i)
        judged = j is not None and j.credit is not None
        quote = None if j is None or j.quote is None else j.quote
        quoted = quote is not None and quote not in ("", "none")
        credited = bool(judged and j.credit > 0)
        rows.append(dict(
            point=i, point_id=p.id, status=cov.status, family=cov.family, judged=judged,
            credit=j.credit if judged else np.nan, credited=credited if judged else np.nan,
            verdict=None if j is None else j.verdict, quote=quote, quoted=quoted,
            quote_verbatim=_contains(answer, quote) if quoted else np.nan,
            quote_is_span=(quote == canonicalize(cov.span or "none")) if quote is not None else np.nan,
            point_text_ok=(j.text == canonicalize(p.text)) if j is not None else np.nan,
            wording_mismatch=(not credited) if judged and cov.status in (PARAPHRASE, MARKED_PARAPHRASE) else np.nan,
            credit_misconception=credited if judged and cov.status == MISCONCEPTION else np.nan,
            credit_absent=credited if judged and cov.status == ABSENT else np.nan))
    credits = [r["credit"] if r["judged"] else 0.0 for r in rows]
    credited = [bool(r["judged"] and r["credited"]) for r in rows]
    written = sum(j.credit for j in first.values() if j.credit is not None)
    parse = read_final_mark(canonicalize(completion), q.max_mark)
    count = chain.sum_value if chain.sum_value is not None else written
    chain_mark = _scheme_mark(q, credited, credits)
    rollout = dict(
        final_mark=parse.mark, parse_status=parse.status, parsed=parse.mark is not None,
        gold=response.gold, max_mark=q.max_mark, correct=parse.mark == response.gold,
        scheme=q.scheme.kind, n_points=len(rows), n_judged=sum(r["judged"] for r in rows),
        all_points_judged=all(r["judged"] for r in rows), extra_judgements=len(chain.judgements) - len(first),
        sum_written=written, sum_stated=chain.sum_value,
        miscount=(abs(chain.sum_value - written) > 1e-9) if chain.sum_value is not None else np.nan,
        wrong_band=_wrong_band(q, chain, count) if isinstance(q.scheme, LevelScheme) else np.nan,
        chain_mark=chain_mark, synthesis_mark=chain.mark_step,
        final_consistent=parse.mark == chain_mark if parse.mark is not None else False,
        final_matches_synthesis=(chain.mark_step is not None and parse.mark is not None
                                 and float(parse.mark) == chain.mark_step))
    return rows, rollout


def _rate(s: pd.Series) -> float:
    s = pd.to_numeric(s, errors="coerce").dropna()
    return float(s.mean()) if len(s) else float("nan")


@dataclass
class BehaviourReport:
    """Tidy tables for the notebook (01_base_policy) and a flat summary of the target numbers."""

    steps: pd.DataFrame  # one row per (response, rollout, marking point)
    rollouts: pd.DataFrame  # one row per (response, rollout)
    by_status: pd.DataFrame  # credit rate per coverage status
    by_family: pd.DataFrame  # credit rate per paraphrase family
    errors: pd.DataFrame  # per teacher error type: opportunities, rate, teacher's rate
    summary: dict


def analyse_behaviour(dataset: Dataset, rollouts: pd.DataFrame, text_col: str = "text",
                      teacher: ErrorModel | None = ErrorModel()) -> BehaviourReport:
    """Measure a policy's grading text against coverage ground truth (error types of Fig. 1 / §1).

    `rollouts` needs `response_id` and `text_col` (e.g. the frame of `generate.generate`); `rollout_id` is
    optional. Responses without coverage (real data) raise.
    """
    by_id = {r.id: r for r in dataset.responses}
    steps, rows = [], []
    for k, rec in enumerate(rollouts.to_dict("records")):
        r = by_id[rec["response_id"]]
        if not r.coverage:
            raise ValueError(f"response {r.id} has no coverage ground truth (synthetic world only)")
        q = dataset.question(r)
        pts, ro = analyse_completion(q, r, str(rec[text_col]))
        key = dict(response_id=r.id, rollout_id=rec.get("rollout_id", k), question_id=q.id)
        steps += [{**key, **p} for p in pts]
        rows.append({**key, **ro})
    st, ro = pd.DataFrame(steps), pd.DataFrame(rows)
    judged = st[st["judged"]] if len(st) else st
    by_status = pd.DataFrame([dict(status=s, n=int((judged["status"] == s).sum()) if len(judged) else 0,
                                   credit_rate=_rate(judged.loc[judged["status"] == s, "credited"]) if len(judged) else np.nan,
                                   covered=s in COVERED_STATUSES) for s in STATUSES])
    fam = judged[judged["family"].notna()] if len(judged) else judged
    by_family = (fam.groupby(["status", "family"])["credited"].agg(n="size", credit_rate="mean").reset_index()
                 if len(fam) else pd.DataFrame(columns=["status", "family", "n", "credit_rate"]))
    em = teacher or ErrorModel.none()
    err_rows = [
        (WORDING_MISMATCH, "plain paraphrase", st["wording_mismatch"][st["status"] == PARAPHRASE], em.p_reject_paraphrase),
        (WORDING_MISMATCH, "marked paraphrase", st["wording_mismatch"][st["status"] == MARKED_PARAPHRASE], em.p_reject_marked),
        (CREDIT_MISCONCEPTION, "misconception", st["credit_misconception"], em.p_credit_misconception),
        ("credit_absent", "absent point", st["credit_absent"], 0.0),
        (MISCOUNT, "sum step", ro["miscount"], em.p_miscount),
        (WRONG_BAND, "LoR level step", ro["wrong_band"], em.p_wrong_band),
    ] if len(st) else []
    errors = pd.DataFrame([dict(error=e, opportunity=o, n=int(pd.to_numeric(s, errors="coerce").notna().sum()),
                                rate=_rate(s), teacher_rate=t) for e, o, s, t in err_rows])
    rate = dict(zip(by_status["status"], by_status["credit_rate"]))
    summary = dict(
        n_rollouts=len(ro), parse_rate=_rate(ro["parsed"]) if len(ro) else np.nan,
        accuracy=_rate(ro["correct"]) if len(ro) else np.nan,
        all_points_judged=_rate(ro["all_points_judged"]) if len(ro) else np.nan,
        credit_absent=rate.get(ABSENT), quote_verbatim=_rate(st["quote_verbatim"]) if len(st) else np.nan,
        quote_is_span=_rate(st["quote_is_span"]) if len(st) else np.nan,
        credit_rate={s: rate.get(s) for s in STATUSES},
        wording_gap=(rate.get(PARAPHRASE, np.nan) - rate.get(MARKED_PARAPHRASE, np.nan)),
        error_rates={f"{e} ({o})": r for e, o, r in zip(errors.get("error", []), errors.get("opportunity", []),
                                                         errors.get("rate", []))},
        final_consistent=_rate(ro["final_consistent"]) if len(ro) else np.nan,
        final_matches_synthesis=_rate(ro["final_matches_synthesis"]) if len(ro) else np.nan)
    return BehaviourReport(st, ro, by_status, by_family, errors, summary)


def behaviour_tables(datasets: dict[str, Dataset], frames: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The behaviour tables of 01_base_policy over every synthetic dataset and decoding: ``credit_by_status``,
    ``error_types`` and ``behaviour_summary`` (scalar entries of each `analyse_behaviour` summary), each with
    ``dataset`` and ``decoding`` columns. ``frames`` maps a decoding name ('greedy', 'rollouts') to a graded
    frame with a ``dataset`` column. Datasets without coverage ground truth (real data) are left out; {} when
    no dataset has it."""
    status, errors, summary = [], [], []
    for name, ds in datasets.items():
        if not any(r.coverage for r in ds.responses):
            continue
        for which, frame in frames.items():
            rep = analyse_behaviour(ds, frame[frame["dataset"] == name])
            status.append(rep.by_status.assign(dataset=name, decoding=which))
            errors.append(rep.errors.assign(dataset=name, decoding=which))
            summary.append(dict(dataset=name, decoding=which,
                                **{k: v for k, v in rep.summary.items() if not isinstance(v, dict)}))
    if not summary:
        return {}
    return dict(credit_by_status=pd.concat(status, ignore_index=True),
                error_types=pd.concat(errors, ignore_index=True), behaviour_summary=pd.DataFrame(summary))

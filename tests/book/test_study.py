"""The study chapter (edit_lib/book/scale.py): the profile values where the study differs from the demo, computed
from the two profiles; the study run's comparisons against its goals where it has results, else a line saying it
has not been run."""
from edit_lib.book.scale import profile_differences, study_page
from edit_lib.config import load_profile


def test_differences_are_computed_from_both_profiles():
    demo, study = load_profile("demo"), load_profile("study")
    d = profile_differences(demo, study).set_index("profile value")
    assert (d.loc["data.datasets.synth_sas.options.ood_questions", "demo"],
            d.loc["data.datasets.synth_sas.options.ood_questions", "study"]) == (20, 100)
    assert d.loc["rl.seeds", "study"] == list(study.rl.seeds)
    assert "rl.decoding.max_new_tokens" not in d.index  # the same in both: not listed
    assert profile_differences(demo, demo).empty


def test_without_a_study_run_the_chapter_says_so():
    page = study_page(load_profile("demo"), load_profile("study"), None, "runs/study/results/")
    assert page.startswith("# The study profile") and "has not been run in this run root" in page
    assert "| rl.learning_rate | 0.001 | 0.0005 |" in page
    assert "What this run can detect" not in page


def test_with_a_study_run_the_chapter_shows_its_goals():
    results = {"09_significance": {"tables": {"significance": [
        dict(dataset="sas", scope="ood_test", system="edit_sft", delta=0.27, delta_ci_low=0.21, delta_ci_high=0.33,
             mde=0.087, delta_se=0.031, n_questions=100)]}},
               "07_evaluation": {"tables": {"table1": [{"dataset": "sas"}]}},
               "00_data": {"extra": {"datasets": {"sas": {}}}}}
    page = study_page(load_profile("demo"), load_profile("study"), results, "runs/study/results/")
    assert "## The study run (`runs/study/results/`)" in page and "has not been run" not in page
    assert "## What this run can detect (the power goals)" in page
    assert "| Table 3: EDIT-SFT − Base | sas | 0.072 | +0.270 [+0.210, +0.330] | 100 questions | 0.087 |" in page
    assert "&lt;= 0.07 | no | 155 questions |" in page  # 100 x (0.087 / 0.07)^2, as the study's record reads it

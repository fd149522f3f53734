"""Evaluation (07-09): every graded system as data, greedy predictions and their cache, the result tables, the
rule-sensitivity interventions (App. I), question-level significance (App. G), the forced read and 01's caveats
(the figures of 07-09 are in ``plots``)."""

"""The README's Table 6 section shows 05's ``table6_pools`` (each arm's pool and truncated rewrites) beside it."""
from edit_lib.book.readme import section_table4


def test_table6_section_shows_each_arm_whole():
    pools = [dict(system="edit_sft", dataset="h", rewrites=8, rewrite_budget=256, truncated=0, accepted=5, kept=2,
                  golden_rollouts=3, pool_trained=5, sft_steps=7),
             dict(system="wo_atomic", dataset="h", rewrites=8, rewrite_budget=1024, truncated=6, accepted=1, kept=0,
                  golden_rollouts=0, pool_trained=0, sft_steps=0)]
    text = section_table4({"05_edit_sft": {"tables": {"table6_pools": pools}}})
    assert "Table 6's arms whole (05)" in text
    assert "| wo_atomic | h | 8 | 1024 | 6 | 1 | 0 | 0 | 0 | 0 |" in text
    assert "n/a (05_edit_sft has no `table6_pools` table)" in section_table4({"05_edit_sft": {"tables": {}}})

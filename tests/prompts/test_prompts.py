"""Prompts and parsers: scheme rendering, [MASK] variants, mark parsing with counted failures, rewrites."""
import pytest

from edit_lib.data.schema import FreeTextScheme, Level, LevelScheme, MarkingPoint, PointsScheme, Question
from edit_lib.prompts.grading import (MASK, NO_MARK, OK, OUT_OF_RANGE, TINY_SEPARATOR, chat_text,
                                      format_final_line, read_final_mark,
                                      render_grading_prompt, step_boundaries, split_steps, tiny_text)
from edit_lib.prompts.rewrite import (RewriteParseError, parse_rewrite, render_checklist_prompt,
                                      render_rewrite_block, render_rewrite_prompt, render_in_rule)

PTS = Question("q1", "biology", "explain osmosis and mitosis .", "",
               PointsScheme((MarkingPoint("p1", "osmosis moves water", 2.0), MarkingPoint("p2", "mitosis divides cells", 1.0)),
                            cap=2.0), 2)
LOR = Question("q2", "history", "discuss treaty .", "",
               LevelScheme((MarkingPoint("p1", "treaty ends war"),),
                           (Level(1, "basic", 1, 3, 1, 2),)), 3)


def test_render_pts_prompt_exact():
    assert render_grading_prompt(PTS, "osmosis moves water .") == (
        "question: explain osmosis and mitosis .\n"
        "mark scheme: points , total 2\n"
        "point 1 ( 2 marks ): osmosis moves water\n"
        "point 2 ( 1 mark ): mitosis divides cells\n"
        "cap 2\n"
        "answer: osmosis moves water .\n"
        "task: judge each point step by step , add the credits , then write Final mark: mark/2")


def test_render_lor_and_free_text():
    p = render_grading_prompt(LOR, "treaty ends war .")
    assert "mark scheme: levels , total 3" in p and "point 1: treaty ends war" in p
    assert "level 1 basic: from 1 points , marks 1 to 3 , 2 per extra point" in p
    ft = Question("q3", "s", "why ?", "", FreeTextScheme("award 1 for a reason", 1), 1)
    assert "mark scheme: rubric , total 1\naward 1 for a reason" in render_grading_prompt(ft, "because")


def test_mask_variants():
    full = render_grading_prompt(PTS, "osmosis moves water .")
    rub = render_grading_prompt(PTS, "osmosis moves water .", mask="rubric")
    ans = render_grading_prompt(PTS, "osmosis moves water .", mask="answer")
    assert f"mark scheme: {MASK}" in rub and "point 1" not in rub and "answer: osmosis moves water ." in rub
    assert f"answer: {MASK}" in ans and "point 1 ( 2 marks )" in ans and "osmosis moves water ." not in ans
    # only the masked section differs
    assert full.split("\n")[0] == rub.split("\n")[0] == ans.split("\n")[0]
    assert full.split("\n")[-1] == rub.split("\n")[-1] == ans.split("\n")[-1]
    with pytest.raises(ValueError):
        render_grading_prompt(PTS, "a", mask="question")


def test_final_line_and_tiny_text():
    assert format_final_line(7, 12) == "Final mark: 7/12"
    assert tiny_text("P", "C") == "P" + TINY_SEPARATOR + "C"


@pytest.mark.parametrize("text,m,mark,status", [
    ("step 1: a\nFinal mark: 7/12", 12, 7, OK),
    ("Final mark: 12/12", 12, 12, OK),
    ("final mark : 0", 3, 0, OK),
    ("Final mark: 3/9\nFinal mark: 5/9", 9, 5, OK),   # the last one counts
    ("step 1: a\nstep 2: b", 9, None, NO_MARK),
    ("Final mark: /9", 9, None, NO_MARK),
    ("", 9, None, NO_MARK),
    ("Final mark: 13/12", 12, None, OUT_OF_RANGE),
    ("Final mark: -1/12", 12, None, OUT_OF_RANGE),
    ("Final mark: 2.5/12", 12, None, OUT_OF_RANGE),
])
def test_read_final_mark(text, m, mark, status):
    p = read_final_mark(text, m)
    assert (p.mark, p.status) == (mark, status)


def test_split_steps_and_boundaries_round_trip():
    steps = ["point 1 a ; answer none ; missing ; credit 0", "total 0 = 0"]
    comp = render_in_rule(steps, "markers") + format_final_line(0, 3)
    assert split_steps(comp) == steps
    b = step_boundaries(comp)
    assert b == [0, len("step 1: " + steps[0] + "\n"), len(render_in_rule(steps, "markers"))]
    assert comp[:b[1]] == "step 1: " + steps[0] + "\n"
    # continuation lines join the step they follow; lines before any step open one
    assert split_steps("intro\nstep 1: a\nmore\nstep 2: b\nFinal mark: 1/2") == ["intro", "a more", "b"]
    assert step_boundaries("step 1: a\nmore\nstep 2: b") == [0, 15, 24]


def test_rewrite_block_round_trip():
    text = render_rewrite_block(3, ["point 2 x ; answer y ; same meaning ; credit 1", "total 1 + 1 = 2"])
    assert text.startswith('<rewrite location="3" span="2">\nstep 1: ')
    blk = parse_rewrite("some preamble\n" + text + "\ntrailing")
    assert (blk.location, blk.span) == (3, 2) and blk.steps[1] == "total 1 + 1 = 2"
    with pytest.raises(ValueError):
        render_rewrite_block(1, ["a", "b", "c", "d"])


@pytest.mark.parametrize("bad,msg", [
    ("no block here", "no <rewrite"),
    ('<rewrite span="1">\nstep 1: a\n</rewrite>', "location"),
    ('<rewrite location="x" span="1">\nstep 1: a\n</rewrite>', "not a positive integer"),
    ('<rewrite location="2" span="4">\nstep 1: a\n</rewrite>', "span must be 1..3"),
    ('<rewrite location="2" span="2">\nstep 1: a\n</rewrite>', "holds 1 sub-steps"),
    ('<rewrite location="2" span="1">\nstep 2: a\n</rewrite>', "numbered"),
    ('<rewrite location="2" span="1">\njust text\n</rewrite>', "does not start with 'step N:'"),
    ('<rewrite location="0" span="1">\nstep 1: a\n</rewrite>', "location must be >= 1"),
])
def test_rewrite_parse_errors(bad, msg):
    with pytest.raises(RewriteParseError, match=msg):
        parse_rewrite(bad)


def test_checklist_and_rewrite_prompts():
    cp = render_checklist_prompt(PTS, "osmosis moves water .", 2)
    assert "correct mark: 2/2" in cp and "list every point verbatim" in cp
    assert "format:" not in cp and cp.endswith("quote the evidence or none")  # the tiny grader's trained prompt
    chat = render_checklist_prompt(PTS, "osmosis moves water .", 2, style="chat")
    assert chat.startswith(cp + "\nformat:\npoint 1 <the point verbatim> ; covered ;")
    assert chat.endswith("\ncovered 1 of 2 points")
    rp = render_rewrite_prompt(PTS, "osmosis moves water .", 2, ["point 1 a", "total 0 = 0"], 2,
                               ["belief moved away from the gold mark"], "point 1 ... ; covered")
    for header in ("# Grading task", "# Oracle reference", "# The full grading attempt",
                   "# Target for rewriting: Substep 2", "# Diagnostic hints for Substep 2",
                   "# Per-criterion rubric analysis (REFERENCE)", "# Atomicity + locality", "# Style",
                   "# Output format"):
        assert header in rp
    assert "correct mark = 2 / 2" in rp and 'step 2: total 0 = 0' in rp and '"total 0 = 0"' in rp
    assert rp.index("# Grading task") < rp.index("# Oracle reference") < rp.index("# Output format")
    with pytest.raises(ValueError):
        render_rewrite_prompt(PTS, "a", 2, ["x"], 2, [], "")


def test_chat_text_uses_template_and_disables_thinking():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]")))
    tok.chat_template = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
                         "{% if add_generation_prompt %}<assistant>{% if enable_thinking is defined and "
                         "not enable_thinking %}NOTHINK{% endif %}{% endif %}")
    out = chat_text(tok, "grade this")
    assert out == "<system>" + out.split("<system>")[1].split("\n")[0] + "\n<user>grade this\n<assistant>NOTHINK"
    assert chat_text(tok, "p", system=None, completion="c") == "<user>p\n<assistant>c\n"


def test_parsers_accept_canonical_tokenizer_form():
    # the tiny model decodes to one space between tokens, every digit and punctuation mark its own token
    comp = "step 1 : point 1 a ; credit 1 2\nstep 1 0 : total 1 2 = 1 2\nFinal mark : 1 2 / 1 4"
    assert read_final_mark(comp, 14) == read_final_mark("Final mark: 12/14", 14)
    assert read_final_mark(comp, 14).mark == 12
    assert read_final_mark("Final mark : 2 . 5 / 9", 9).status == OUT_OF_RANGE
    assert split_steps(comp) == ["point 1 a ; credit 1 2", "total 1 2 = 1 2"]
    blk = parse_rewrite('< rewrite location = " 1 2 " span = " 2 " >\nstep 1 : a\nstep 2 : b\n< / rewrite >')
    assert (blk.location, blk.span, blk.steps) == (12, 2, ("a", "b"))


def test_chat_grading_instruction_asks_for_one_judgement_per_line():
    tiny = render_grading_prompt(PTS, "osmosis moves water .")
    chat = render_grading_prompt(PTS, "osmosis moves water .", style="chat")
    assert tiny == render_grading_prompt(PTS, "osmosis moves water .", style="tiny")  # the embedded text is fixed
    t, c = tiny.split("\n"), chat.split("\n")
    # only the task line differs, and in chat it stands before the answer (a shared prefix per question)
    assert c[:-2] == t[:-2] and c[-1] == t[-2] == "answer: osmosis moves water ."
    task = c[-2]
    assert "one judgement per line" in task and "'Final mark: m/2'" in task and "0 to 2" in task
    assert "blank lines" in task
    # what a compliant chat model writes segments into its lines, and its mark parses
    reply = ("Point 1 (osmosis moves water): met, the answer says 'osmosis moves water', credit 2.\n"
             "Point 2 (mitosis divides cells): not met, evidence none, credit 0.\n"
             "Total: 2 + 0 = 2, capped at 2.\n"
             "Final mark: 2/2")
    assert len(split_steps(reply)) == 3 and read_final_mark(reply, 2).mark == 2
    with pytest.raises(ValueError, match="style"):
        render_grading_prompt(PTS, "a", style="qwen")


def test_policy_uses_chat_instruction_only_for_chat_models():
    from edit_lib.model.policy import Policy
    from edit_lib.prompts.grading import GRADER_SYSTEM

    class Tok:
        def apply_chat_template(self, msgs, tokenize, add_generation_prompt, enable_thinking):
            return "|".join(m["content"] for m in msgs)

    chat = Policy(None, Tok(), "chat").grading_input(PTS, "osmosis moves water .")
    assert chat == GRADER_SYSTEM + "|" + render_grading_prompt(PTS, "osmosis moves water .", style="chat")
    tiny = Policy(None, None, "tiny").grading_input(PTS, "osmosis moves water .")
    assert tiny == tiny_text(render_grading_prompt(PTS, "osmosis moves water ."))


@pytest.mark.parametrize("text,mark", [("**Final mark:** 3/5", 3), ("**Final mark: 4/5**", 4),
                                       ("Final mark: **2**/5", 2), ("final mark:5/5", 5)])
def test_read_final_mark_accepts_markdown_emphasis(text, mark):
    assert read_final_mark("Step 1: a\n" + text, 5).mark == mark

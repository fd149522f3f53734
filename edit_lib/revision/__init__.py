"""Phase 1 of EDIT-SFT after candidate selection (Sec. 2.2): rubric checklist, atomic revision under the
locality constraint and the checklist-mimicry detector (App. J, Figure 6), locator hints, outcome filter and
SFT pool bookkeeping (App. F, App. B). Pure functions; the notebooks call the policy and pass its text here."""

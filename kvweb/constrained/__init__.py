"""Part 5, constrained decoding (SGLang's compressed FSM): a `regex_parser`, Thompson's `nfa`,
the subset construction into a `dfa`, its compression into jump-forward chains
(`jump_forward`) and masked decoding on the mini model (`decoding`). Shown by the lab `fsm`.
"""

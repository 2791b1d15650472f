"""Training: loss functions (losses.py), the supervised loop + adapters (sft.py), IPO
(ipo.py), the on-policy RLOO / OPD loop (rloo.py) and the stage side of training (run.py).

Import from the submodule you need (e.g. `countdown_rlvr.train.sft`): the package imports
none of them, so a stage runs, and DVC tracks, only the training code it uses.
"""

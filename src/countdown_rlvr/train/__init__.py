"""Training: loss functions (losses.py), the runtime every loop shares + the stage side
(runtime.py), the supervised loop (sft.py), IPO (ipo.py) and the on-policy RLOO / OPD loop
(rloo.py). Their configs are the section dataclasses of countdown_rlvr.core (train_config,
ipo_config, rl_config).

Import from the submodule you need (e.g. `countdown_rlvr.train.sft`): the package imports
none of them, so a stage runs, and DVC tracks, only the training code it uses.
"""

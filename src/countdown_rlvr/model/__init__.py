"""The model: the tiny Qwen2-style model and its tokenizer, loading and saving policies,
the sampler and its decode loop, log-probabilities, adapter model cards.
Imports core and task.
"""

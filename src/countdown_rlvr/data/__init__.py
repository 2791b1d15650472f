"""Data: solver and teacher traces, near-duplicate removal, preference pairs and the
repair-format SFT examples. Imports core and task.
"""

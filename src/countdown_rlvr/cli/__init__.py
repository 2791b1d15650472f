"""The command line and the tools that write and check the pipeline's own files:
`countdown-rlvr` (main), the dvc.yaml generator (experiment), the params check
(stage_params), the overrides helper and the stage map.
"""

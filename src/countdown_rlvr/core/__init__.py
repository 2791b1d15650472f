"""The base layer: params (config, one *_config module per section, and sections, the map
of them all), files (io), errors, replicate seeds, timing, the arm registry and the
environment a stage sets before torch loads (stage_env). Imports nothing else of the package.
"""

"""The base layer: params (config), files (io), errors, replicate seeds, timing and
the arm registry. Imports nothing else of the package.
"""

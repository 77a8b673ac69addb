"""The authoring side: reading and validating YAML, analyses, rendering, code generation, the CLI.

Everything an author, a reviewer or CI runs; an engine never imports it (``tests/test_layering.py``).
It may use third parties (PyYAML, jsonschema, tabulate) and the whole runtime; the runtime imports it
only inside the few functions that need it (a checkout's build of the shipped matrix, :func:`capmatrix.load`,
suggestions).
"""

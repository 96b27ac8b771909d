"""Helpers the tests share: the random-program fuzzer and the catalogue of bad input.

``tests/`` is on the import path while pytest runs (``pythonpath`` in pyproject.toml),
so test modules import these as ``support.fuzz_programs`` and
``support.bad_input_catalogue``. Both also run as scripts (``python
tests/support/fuzz_programs.py --programs 10000``).
"""

"""The runtime's decision mechanics: records, value classes, partitions, tables, bit sets, answers.

Private: the public face is :mod:`capmatrix.resolver`, :mod:`capmatrix.matrix` and :mod:`capmatrix.regions`.
Standard library only, like everything outside :mod:`capmatrix.authoring`.
"""

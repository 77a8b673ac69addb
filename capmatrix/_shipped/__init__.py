"""The shipped matrix at run time: the compiled artifact, its JSON payload, and the process default.

Private: :func:`capmatrix.resolve` and :func:`capmatrix.select` are the face. Standard library only.
"""

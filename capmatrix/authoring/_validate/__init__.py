"""The loader's checks past reading: shape (fast predicate), values, references, and the hint budget."""

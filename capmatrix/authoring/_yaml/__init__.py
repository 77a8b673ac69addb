"""The YAML reader: safe, strict, with a side table of source positions (:mod:`.read` is its face)."""

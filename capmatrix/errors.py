"""Errors raised by capmatrix; each carries its data and renders itself in ``__str__``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = [
    "ERROR_CODES",
    "CapabilityError",
    "CapabilityErrors",
    "CapmatrixError",
    "InvalidArgument",
    "InvalidFile",
    "InvalidQuery",
    "InvalidValue",
    "UnknownName",
    "did_you_mean",
    "echo",
]

#: Every code a :class:`CapabilityError` can carry, with its title: E-codes from reading and validating
#: capability files (each documented with an example in ``docs/authoring.md``, in this order), T-codes
#: from expectation case files (``docs/analysis.md``). The analyses' C-codes are
#: :data:`capmatrix.authoring.analysis.CODES`.
ERROR_CODES: dict[str, str] = {
    "E000": "unclassified problem",
    "E001": "the file cannot be read as YAML",
    "E002": "YAML the reader refuses",
    "E100": "a rule with both or neither of `grant` and `exclude`",
    "E101": "unknown key",
    "E102": "a required field is missing",
    "E103": "a value of the wrong type or outside its enum",
    "E104": "not a condition",
    "E200": "the axes are declared twice, or nowhere",
    "E201": "a kernel, model or role is defined twice",
    "E210": "an axis declared wrongly",
    "E211": "a bad or repeated axis value",
    "E212": "a family names undeclared values",
    "E213": "an axis default that is not one of its values",
    "E214": "an optional axis declared wrongly",
    "E215": "an environment axis without a default",
    "E216": "a derived axis's table is wrong",
    "E217": "an axis name reserved by the command line",
    "E218": "an enum value that is not a plain word",
    "E219": "a spelling of an enum value declared wrongly",
    "E220": "a rule id used twice",
    "E221": "a rule names an unknown axis",
    "E222": "a condition value the axis does not know",
    "E223": "an empty range",
    "E224": "a bad `multiple_of`",
    "E225": "a range whose numbers cannot be read",
    "E226": "a kernel, table or role reads another engine's axis",
    "E227": "an axis or alias named like an option of `capmatrix query` or `select`",
    "E228": "an int axis's `min` / `max` declared wrongly (on another axis, inverted, excluding a value)",
    "E230": "a model, role or guard pins an unknown axis",
    "E231": "a model, role or guard pins a value the axis does not know",
    "E232": "a Hugging Face model_type mapped to two models",
    "E233": "a Hugging Face id listed under two models",
    "E240": "a role names an unknown kernel",
    "E241": "a role lists a kernel twice",
    "E242": "a role with both or neither of `candidates` and `orders`",
    "E243": "a role order that never applies",
    "E244": "a gate guards an unknown kernel or role",
    "E245": "a kernel that is not a gate guards others",
    "E246": "a guard's `means` on a non-enum axis, or reading an axis the meant one lacks values of",
    "E247": "a guard's `caught_by` names no other gate",
    "E248": "a role's `asks_first` names a role it cannot ask first",
    "E249": "a role and a role it asks first pin different values",
    "E250": "a GPU whose sm the sm axis does not declare",
    "E251": "a GPU name or alias used twice",
    "E260": "an engine's releases declared wrongly (twice, out of order, an axis name taken)",
    "E261": "`since` / `until` name a release the engine does not declare",
    "E262": "a release span that holds no release, or releases given twice",
    "E263": "`since` / `until` on an entry whose engine declares no releases",
    "E264": "an engine word listed twice for one release",
    "T001": "an expectation file of the wrong shape",
    "T002": "a malformed expectation case",
    "T003": "no expectation case found",
}


#: The most characters of one user value an error message repeats (the rest is elided, with the length).
MAX_ECHO = 80


def echo(value: object, *, limit: int = MAX_ECHO) -> str:
    """``repr(value)`` for an error message, printable and cut to about ``limit`` characters.

    A value from a file or a command line can be of any length; messages repeat at most ``limit``
    characters of it and say how long it was.

    >>> echo("gqa")
    "'gqa'"
    >>> echo("x" * 1000, limit=8)
    "'xxxxxxxx'... (1000 characters)"
    """
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a foreign __repr__ (or an int too long to print) may raise
        return f"<{type(value).__name__}>"
    if len(text) > limit + 2:
        text = f"{text[:limit]}... ({len(text)} characters)"
    if not text.isprintable():  # a repr of a container or an object can hold raw characters
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
    return text


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """Return the closest of ``choices`` to ``word``, or None when nothing is close."""
    import difflib  # noqa: PLC0415 - only errors need it; keeps `import capmatrix` light
    matches = difflib.get_close_matches(str(word), sorted(set(choices)), n=1, cutoff=0.6)
    return matches[0] if matches else None


class CapmatrixError(Exception):
    """Root of every error capmatrix raises on purpose."""


class CapabilityError(CapmatrixError, ValueError):
    """One problem in the capability data, located at ``path:line:column`` (1-based).

    >>> print(CapabilityError("caps/x.yaml", 3, 7, "kernels.xqa", "bad value", hint="use 'gqa'"))
    caps/x.yaml:3:7: kernels.xqa: bad value (use 'gqa')
    """

    def __init__(
        self,
        path: str,
        line: int | None,
        column: int | None,
        json_path: str,
        message: str,
        *,
        hint: str | None = None,
        code: str = "E000",
    ) -> None:
        super().__init__(path, line, column, json_path, message)
        self.path = path
        self.line = line
        self.column = column
        self.json_path = json_path
        self.message = message
        self.hint = hint
        self.code = code

    @property
    def location(self) -> str:
        """``path:line:column`` (as much of it as is known)."""
        parts = [self.path]
        if self.line is not None:
            parts.append(str(self.line))
            if self.column is not None:
                parts.append(str(self.column))
        return ":".join(parts)

    def sort_key(self) -> tuple[str, int, int, str]:
        """Order problems by file, then position."""
        return (self.path, self.line or 0, self.column or 0, self.message)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready form."""
        return {
            "code": self.code,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "json_path": self.json_path,
            "message": self.message,
            "hint": self.hint,
        }

    def __str__(self) -> str:
        where = f"{self.json_path}: " if self.json_path else ""
        hint = f" ({self.hint})" if self.hint else ""
        return f"{self.location}: {where}{self.message}{hint}"


class CapabilityErrors(CapmatrixError, ValueError):
    """Every problem found while loading a matrix, sorted by location."""

    def __init__(self, errors: Sequence[CapabilityError]) -> None:
        self.errors = tuple(sorted(errors, key=CapabilityError.sort_key))
        super().__init__(self.errors)

    def __str__(self) -> str:
        files = len({e.path for e in self.errors})
        lines = [str(e) for e in self.errors]
        noun = "problem" if len(self.errors) == 1 else "problems"
        fnoun = "file" if files == 1 else "files"
        lines.append(f"capmatrix: {len(self.errors)} {noun} in {files} {fnoun}")
        return "\n".join(lines)


class InvalidFile(CapmatrixError, ValueError):
    """A file read beside the capability YAML (a ``check`` baseline, an evidence file) cannot be used.

    ``path`` is how the file is shown, ``line`` and ``column`` (1-based) where the problem is when it
    has a place, ``message`` what is wrong and ``hint`` what to do.

    >>> print(InvalidFile("caps/check-baseline.json", "not valid JSON (Expecting value)", line=3,
    ...                   column=9, hint="rewrite it"))
    caps/check-baseline.json:3:9: not valid JSON (Expecting value); rewrite it
    """

    def __init__(self, path: str, message: str, *, line: int | None = None, column: int | None = None,
                 hint: str | None = None) -> None:
        super().__init__(path, message, line, column, hint)
        self.path = path
        self.message = message
        self.line = line
        self.column = column
        self.hint = hint

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}:{self.column}"
        return f"{where}: {self.message}" + (f"; {self.hint}" if self.hint else "")


class InvalidQuery(CapmatrixError, ValueError):
    """A query names an unknown kernel, model, role, axis or value, or gives a value of the wrong type.

    >>> print(InvalidQuery("unknown axis 'smm'", suggestion="sm"))
    unknown axis 'smm' (did you mean 'sm'?)
    """

    def __init__(self, message: str, *, suggestion: str | None = None) -> None:
        super().__init__(message, suggestion)
        self.message = message
        self.suggestion = suggestion

    def __str__(self) -> str:
        if self.suggestion is None:
            return self.message
        return f"{self.message} (did you mean {self.suggestion!r}?)"


#: The most names an unknown-name message lists; more are left to ``capmatrix list``.
SHOWN_CHOICES = 12
#: What ``capmatrix list`` calls each kind of name (a kernel may also be a gate).
_LISTS = {"kernel": "`capmatrix list kernels` and `capmatrix list gates`", "axis": "`capmatrix list axes`",
          "GPU": "`capmatrix list gpus`"}


class UnknownName(InvalidQuery, LookupError):
    """A query or call names a kernel, model, role or axis the matrix does not declare."""

    def __init__(self, what: str, name: object, choices: Iterable[str]) -> None:
        choices = sorted(choices)
        self.what = what
        self.name = name
        self.choices = tuple(choices)
        if not choices:
            listing = f"the matrix declares no {what}s"
        elif len(choices) <= SHOWN_CHOICES:
            listing = f"known: {', '.join(choices)}"
        else:
            listing = f"{len(choices)} known, listed by {_LISTS.get(what, f'`capmatrix list {what}s`')}"
        super().__init__(
            f"unknown {what} {echo(name)}; {listing}",
            suggestion=did_you_mean(name, choices) if isinstance(name, str) else None,
        )


class InvalidValue(InvalidQuery):
    """A text does not parse as a value of an axis (see :meth:`capmatrix.Axis.parse`).

    ``expected`` says what the axis takes (``an integer``, ``true or false``).

    >>> print(InvalidValue("sm", "nine", "an integer"))
    axis 'sm' expects an integer, got 'nine'
    """

    def __init__(self, axis: str, text: str, expected: str) -> None:
        self.axis = axis
        self.text = text
        self.expected = expected
        super().__init__(f"axis {echo(axis)} expects {expected}, got {echo(text)}")


class InvalidArgument(InvalidQuery):
    """An argument of an engine adapter's function has the wrong type or value.

    ``argument`` names it (``use_mla``, ``capability``, ``extra['sm']``, ``config['architectures']``,
    ``version``),
    ``value`` is what was given and ``expected`` says what it takes. The adapters of
    :mod:`capmatrix.engine` (``vllm``, ``sglang``, ``trtllm``) and :mod:`capmatrix.releases` raise it.

    >>> print(InvalidArgument("use_mla", "False", "True or False (a bool)"))
    argument 'use_mla' expects True or False (a bool), got 'False'
    """

    def __init__(self, argument: str, value: object, expected: str, *, suggestion: str | None = None) -> None:
        self.argument = argument
        self.value = value
        self.expected = expected
        super().__init__(f"argument {argument!r} expects {expected}, got {echo(value)}",
                         suggestion=suggestion)

"""GitHub Actions workflow commands: problems and findings as pull-request annotations.

``::error file=F,line=L,col=C,title=T::message`` (``warning`` and ``notice`` alike). The message and
the property values are escaped as the Actions runner reads them back: ``%``, CR and LF in both;
``:`` and ``,`` too in property values, which those characters would otherwise end.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: every command would import it for annotations only
if TYPE_CHECKING:
    from capmatrix.authoring.analysis import Finding
    from capmatrix.errors import CapabilityError

__all__ = ["annotation", "escape_data", "escape_property", "finding_annotation", "problem_annotation"]

#: Finding severity -> workflow command.
_LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def escape_data(text: str) -> str:
    """Escape a message (the part after ``::``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a property value (``file=``, ``title=``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(
    level: str,
    message: str,
    *,
    file: str | None = None,
    line: int | None = None,
    col: int | None = None,
    title: str | None = None,
) -> str:
    r"""One workflow command line, e.g. ``::error file=a.yaml,line=3,col=5::bad``.

    >>> annotation("warning", "50% done,\nnext", file="a,b.yaml", line=3, title="C1: x")
    '::warning file=a%2Cb.yaml,line=3,title=C1%3A x::50%25 done,%0Anext'
    """
    props = []
    if file is not None:
        props.append(f"file={escape_property(file)}")
        if line is not None:
            props.append(f"line={line}")
            if col is not None:
                props.append(f"col={col}")
    if title is not None:
        props.append(f"title={escape_property(title)}")
    head = f"::{level}" + (" " + ",".join(props) if props else "")
    return f"{head}::{escape_data(message)}"


def problem_annotation(problem: CapabilityError) -> str:
    """A validation problem as an ``::error`` at its file, line and column."""
    where = f"{problem.json_path}: " if problem.json_path else ""
    hint = f" ({problem.hint})" if problem.hint else ""
    return annotation(
        "error", f"{where}{problem.message}{hint}", file=problem.path, line=problem.line,
        col=problem.column, title=f"capmatrix {problem.code}",
    )


def finding_annotation(finding: Finding, witness: str | None = None) -> str:
    """A ``check`` finding as ``::error`` / ``::warning`` / ``::notice`` at its first location."""
    first = finding.locations[0] if finding.locations else None
    lines = [finding.message]
    lines.extend(f"see {loc}" for loc in finding.locations[1:])
    if witness is not None:
        lines.append(f"witness: {witness}")
    return annotation(
        _LEVELS[str(finding.severity)], "\n".join(lines),
        file=first.path if first is not None and first.path else None,
        line=first.line if first is not None else None,
        col=first.column if first is not None else None,
        title=f"capmatrix {finding.code} {finding.title}",
    )

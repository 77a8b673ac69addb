"""capmatrix: a declarative capability matrix for GPU attention kernels.

Names are imported on first use (PEP 562), so ``import capmatrix`` costs little: a command line or
a pre-commit hook pays only for what it touches, and an engine that imports the package at start pays
for the loader, the resolver and the data on its first :func:`resolve`.
"""

import sys

# Not typing.TYPE_CHECKING: importing typing alone would double the cost of `import capmatrix`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from capmatrix._shipped.default import default_matrix as default_matrix
    from capmatrix._shipped.default import reload as reload
    from capmatrix._shipped.default import resolve as resolve
    from capmatrix._shipped.default import select as select
    from capmatrix._shipped.default import suggest as suggest
    from capmatrix.authoring._suggest import Suggestion as Suggestion
    from capmatrix.authoring.loader import iter_problems as iter_problems
    from capmatrix.authoring.loader import load as load
    from capmatrix.errors import CapabilityError as CapabilityError
    from capmatrix.errors import CapabilityErrors as CapabilityErrors
    from capmatrix.errors import CapmatrixError as CapmatrixError
    from capmatrix.errors import InvalidQuery as InvalidQuery
    from capmatrix.errors import UnknownName as UnknownName
    from capmatrix.matrix import Matrix as Matrix
    from capmatrix.model import Axis as Axis
    from capmatrix.model import AxisType as AxisType
    from capmatrix.model import Condition as Condition
    from capmatrix.model import Effect as Effect
    from capmatrix.model import Kernel as Kernel
    from capmatrix.model import ModelFamily as ModelFamily
    from capmatrix.model import Role as Role
    from capmatrix.model import Rule as Rule
    from capmatrix.model import Status as Status
    from capmatrix.query import ANY as ANY
    from capmatrix.query import KernelQuery as KernelQuery
    from capmatrix.regions import Region as Region
    from capmatrix.resolver import Reason as Reason
    from capmatrix.resolver import Resolution as Resolution
    from capmatrix.resolver import Resolver as Resolver
    from capmatrix.resolver import Selection as Selection
    from capmatrix.resolver import Verdict as Verdict

#: Public name -> the module that defines it.
_WHERE = {
    "default_matrix": "capmatrix._shipped.default",
    "reload": "capmatrix._shipped.default",
    "resolve": "capmatrix._shipped.default",
    "select": "capmatrix._shipped.default",
    "suggest": "capmatrix._shipped.default",
    "Suggestion": "capmatrix.authoring._suggest",
    "CapabilityError": "capmatrix.errors",
    "CapabilityErrors": "capmatrix.errors",
    "CapmatrixError": "capmatrix.errors",
    "InvalidQuery": "capmatrix.errors",
    "UnknownName": "capmatrix.errors",
    "iter_problems": "capmatrix.authoring.loader",
    "load": "capmatrix.authoring.loader",
    "Matrix": "capmatrix.matrix",
    "Axis": "capmatrix.model",
    "AxisType": "capmatrix.model",
    "Condition": "capmatrix.model",
    "Effect": "capmatrix.model",
    "Kernel": "capmatrix.model",
    "ModelFamily": "capmatrix.model",
    "Role": "capmatrix.model",
    "Rule": "capmatrix.model",
    "Status": "capmatrix.model",
    "ANY": "capmatrix.query",
    "KernelQuery": "capmatrix.query",
    "Region": "capmatrix.regions",
    "Reason": "capmatrix.resolver",
    "Resolution": "capmatrix.resolver",
    "Resolver": "capmatrix.resolver",
    "Selection": "capmatrix.resolver",
    "Verdict": "capmatrix.resolver",
}

__all__ = [
    "ANY",
    "Axis",
    "AxisType",
    "CapabilityError",
    "CapabilityErrors",
    "CapmatrixError",
    "Condition",
    "Effect",
    "InvalidQuery",
    "Kernel",
    "KernelQuery",
    "Matrix",
    "ModelFamily",
    "Reason",
    "Region",
    "Resolution",
    "Resolver",
    "Role",
    "Rule",
    "Selection",
    "Status",
    "Suggestion",
    "UnknownName",
    "Verdict",
    "default_matrix",
    "iter_problems",
    "load",
    "reload",
    "resolve",
    "select",
    "suggest",
]


def __dir__() -> list[str]:
    return list(__all__)


def __getattr__(name: str) -> object:
    """Import a public name (or a submodule) on first access, then keep it as a module global."""
    where = _WHERE.get(name)
    if where is None:
        submodule = f"{__name__}.{name}"
        try:
            __import__(submodule)
        except ModuleNotFoundError as exc:
            if exc.name != submodule:
                raise
            msg = f"module {__name__!r} has no attribute {name!r}"
            raise AttributeError(msg) from None
        return sys.modules[submodule]
    __import__(where)
    value = getattr(sys.modules[where], name)
    globals()[name] = value
    return value

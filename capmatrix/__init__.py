"""capmatrix: a declarative capability matrix for GPU attention kernels."""

from capmatrix.errors import (
    CapabilityError as CapabilityError,
    CapabilityErrors as CapabilityErrors,
    CapmatrixError as CapmatrixError,
    InvalidQuery as InvalidQuery,
    UnknownName as UnknownName,
)
from capmatrix.loader import iter_problems as iter_problems, load as load
from capmatrix.matrix import Matrix as Matrix
from capmatrix.model import (
    Axis as Axis,
    AxisType as AxisType,
    Condition as Condition,
    Effect as Effect,
    Kernel as Kernel,
    ModelFamily as ModelFamily,
    Role as Role,
    Rule as Rule,
    Status as Status,
)
from capmatrix.query import ANY as ANY, KernelQuery as KernelQuery
from capmatrix.regions import Region as Region
from capmatrix.resolver import (
    Reason as Reason,
    Resolution as Resolution,
    Resolver as Resolver,
    Selection as Selection,
    Verdict as Verdict,
    default_matrix as default_matrix,
    resolve as resolve,
    select as select,
)

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
    "UnknownName",
    "Verdict",
    "default_matrix",
    "iter_problems",
    "load",
    "resolve",
    "select",
]


def __dir__() -> list[str]:
    return list(__all__)

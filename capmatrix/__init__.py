"""capmatrix: a declarative capability matrix for GPU attention kernels."""

from capmatrix._default import (
    default_matrix as default_matrix,
)
from capmatrix._default import (
    reload as reload,
)
from capmatrix._default import (
    resolve as resolve,
)
from capmatrix._default import (
    select as select,
)
from capmatrix.errors import (
    CapabilityError as CapabilityError,
)
from capmatrix.errors import (
    CapabilityErrors as CapabilityErrors,
)
from capmatrix.errors import (
    CapmatrixError as CapmatrixError,
)
from capmatrix.errors import (
    InvalidQuery as InvalidQuery,
)
from capmatrix.errors import (
    UnknownName as UnknownName,
)
from capmatrix.loader import iter_problems as iter_problems
from capmatrix.loader import load as load
from capmatrix.matrix import Matrix as Matrix
from capmatrix.model import (
    Axis as Axis,
)
from capmatrix.model import (
    AxisType as AxisType,
)
from capmatrix.model import (
    Condition as Condition,
)
from capmatrix.model import (
    Effect as Effect,
)
from capmatrix.model import (
    Kernel as Kernel,
)
from capmatrix.model import (
    ModelFamily as ModelFamily,
)
from capmatrix.model import (
    Role as Role,
)
from capmatrix.model import (
    Rule as Rule,
)
from capmatrix.model import (
    Status as Status,
)
from capmatrix.query import ANY as ANY
from capmatrix.query import KernelQuery as KernelQuery
from capmatrix.regions import Region as Region
from capmatrix.resolver import (
    Reason as Reason,
)
from capmatrix.resolver import (
    Resolution as Resolution,
)
from capmatrix.resolver import (
    Resolver as Resolver,
)
from capmatrix.resolver import (
    Selection as Selection,
)
from capmatrix.resolver import (
    Verdict as Verdict,
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
    "reload",
    "resolve",
    "select",
]


def __dir__() -> list[str]:
    return list(__all__)

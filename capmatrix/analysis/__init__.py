"""Analyses of capability matrices, as data: static checks, semantic diffs, legacy comparisons, expectations.

Each analysis lives in a private module behind this face and works on regions (never cell by cell):
``_check`` (``capmatrix check``: findings with stable C-codes), ``_diff`` (where support and selections
moved between two matrices), ``_legacy`` (a hard-coded predicate against a kernel), ``_expect``
(expectation cases with rule coverage); ``_diagram`` (decision diagrams) and ``_boxes`` (over the core's
``capmatrix._partition``) are the region engines they share.
Nothing here prints: :mod:`capmatrix.cli` renders.
"""

from __future__ import annotations

from capmatrix.analysis._boxes import Area as Area
from capmatrix.analysis._check import check as check
from capmatrix.analysis._check import check_path as check_path
from capmatrix.analysis._check import problem_findings as problem_findings
from capmatrix.analysis._diff import Change as Change
from capmatrix.analysis._diff import KernelDiff as KernelDiff
from capmatrix.analysis._diff import MatrixDiff as MatrixDiff
from capmatrix.analysis._diff import RoleDiff as RoleDiff
from capmatrix.analysis._diff import RoleShift as RoleShift
from capmatrix.analysis._diff import diff as diff
from capmatrix.analysis._diff import union_space as union_space
from capmatrix.analysis._expect import Case as Case
from capmatrix.analysis._expect import CaseResult as CaseResult
from capmatrix.analysis._expect import ExpectReport as ExpectReport
from capmatrix.analysis._expect import discover_cases as discover_cases
from capmatrix.analysis._expect import load_cases as load_cases
from capmatrix.analysis._expect import run_case as run_case
from capmatrix.analysis._expect import run_expectations as run_expectations
from capmatrix.analysis._findings import CODES as CODES
from capmatrix.analysis._findings import MAX_REGIONS as MAX_REGIONS
from capmatrix.analysis._findings import CheckResult as CheckResult
from capmatrix.analysis._findings import Finding as Finding
from capmatrix.analysis._findings import Severity as Severity
from capmatrix.analysis._findings import Witness as Witness
from capmatrix.analysis._legacy import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from capmatrix.analysis._legacy import MAX_CALLS as MAX_CALLS
from capmatrix.analysis._legacy import LegacyComparison as LegacyComparison
from capmatrix.analysis._legacy import LegacyError as LegacyError
from capmatrix.analysis._legacy import PredicateOutput as PredicateOutput
from capmatrix.analysis._legacy import compare_legacy as compare_legacy
from capmatrix.analysis._legacy import compare_legacy_file as compare_legacy_file
from capmatrix.analysis._legacy import load_predicate as load_predicate
from capmatrix.analysis._legacy import parse_where as parse_where
from capmatrix.analysis._releases import ReleaseDiff as ReleaseDiff
from capmatrix.analysis._releases import SelectionChange as SelectionChange
from capmatrix.analysis._releases import release_diff as release_diff
from capmatrix.analysis._roles import Gap as Gap
from capmatrix.analysis._roles import TooManyRegions as TooManyRegions
from capmatrix.analysis._roles import bounded_gap as bounded_gap
from capmatrix.analysis._roles import role_gap as role_gap
from capmatrix.analysis._roles import role_regions as role_regions

__all__ = [
    "CODES",
    "DEFAULT_TIMEOUT",
    "MAX_CALLS",
    "MAX_REGIONS",
    "Area",
    "Case",
    "CaseResult",
    "Change",
    "CheckResult",
    "ExpectReport",
    "Finding",
    "Gap",
    "KernelDiff",
    "LegacyComparison",
    "LegacyError",
    "MatrixDiff",
    "PredicateOutput",
    "ReleaseDiff",
    "RoleDiff",
    "RoleShift",
    "SelectionChange",
    "Severity",
    "TooManyRegions",
    "Witness",
    "bounded_gap",
    "check",
    "check_path",
    "compare_legacy",
    "compare_legacy_file",
    "diff",
    "discover_cases",
    "load_cases",
    "load_predicate",
    "parse_where",
    "problem_findings",
    "release_diff",
    "role_gap",
    "role_regions",
    "run_case",
    "run_expectations",
    "union_space",
]


def __dir__() -> list[str]:
    return list(__all__)

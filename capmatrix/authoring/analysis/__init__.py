"""Analyses of capability matrices, as data: static checks, semantic diffs, legacy comparisons, expectations.

Each analysis lives in a private module behind this face and works on regions (never cell by cell):
``_check`` (``capmatrix check``: findings with stable C-codes), ``_diff`` (where support and selections
moved between two matrices), ``_legacy`` (a hard-coded predicate against a kernel), ``_expect``
(expectation cases with rule coverage); ``_diagram`` (decision diagrams) and ``_boxes`` (over the core's
``capmatrix._core.partition``) are the region engines they share.
Nothing here prints: :mod:`capmatrix.authoring.cli` renders.
"""

from __future__ import annotations

from capmatrix.authoring.analysis._boxes import Area as Area
from capmatrix.authoring.analysis._check import check as check
from capmatrix.authoring.analysis._check import check_path as check_path
from capmatrix.authoring.analysis._check import problem_findings as problem_findings
from capmatrix.authoring.analysis._diff import Change as Change
from capmatrix.authoring.analysis._diff import KernelDiff as KernelDiff
from capmatrix.authoring.analysis._diff import MatrixDiff as MatrixDiff
from capmatrix.authoring.analysis._diff import RoleDiff as RoleDiff
from capmatrix.authoring.analysis._diff import RoleShift as RoleShift
from capmatrix.authoring.analysis._diff import diff as diff
from capmatrix.authoring.analysis._diff import union_space as union_space
from capmatrix.authoring.analysis._expect import Case as Case
from capmatrix.authoring.analysis._expect import CaseResult as CaseResult
from capmatrix.authoring.analysis._expect import ExpectReport as ExpectReport
from capmatrix.authoring.analysis._expect import discover_cases as discover_cases
from capmatrix.authoring.analysis._expect import load_cases as load_cases
from capmatrix.authoring.analysis._expect import run_case as run_case
from capmatrix.authoring.analysis._expect import run_expectations as run_expectations
from capmatrix.authoring.analysis._findings import CODES as CODES
from capmatrix.authoring.analysis._findings import MAX_REGIONS as MAX_REGIONS
from capmatrix.authoring.analysis._findings import CheckResult as CheckResult
from capmatrix.authoring.analysis._findings import Finding as Finding
from capmatrix.authoring.analysis._findings import Severity as Severity
from capmatrix.authoring.analysis._findings import Witness as Witness
from capmatrix.authoring.analysis._legacy import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from capmatrix.authoring.analysis._legacy import MAX_CALLS as MAX_CALLS
from capmatrix.authoring.analysis._legacy import LegacyComparison as LegacyComparison
from capmatrix.authoring.analysis._legacy import LegacyError as LegacyError
from capmatrix.authoring.analysis._legacy import PredicateOutput as PredicateOutput
from capmatrix.authoring.analysis._legacy import compare_legacy as compare_legacy
from capmatrix.authoring.analysis._legacy import compare_legacy_file as compare_legacy_file
from capmatrix.authoring.analysis._legacy import load_predicate as load_predicate
from capmatrix.authoring.analysis._legacy import parse_where as parse_where
from capmatrix.authoring.analysis._releases import ReleaseDiff as ReleaseDiff
from capmatrix.authoring.analysis._releases import SelectionChange as SelectionChange
from capmatrix.authoring.analysis._releases import release_diff as release_diff
from capmatrix.authoring.analysis._roles import Gap as Gap
from capmatrix.authoring.analysis._roles import TooManyRegions as TooManyRegions
from capmatrix.authoring.analysis._roles import bounded_gap as bounded_gap
from capmatrix.authoring.analysis._roles import role_gap as role_gap
from capmatrix.authoring.analysis._roles import role_regions as role_regions

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

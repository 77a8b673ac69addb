"""``asks_first``: a role composed of the roles an engine asks before it, and every misuse, located."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

import capmatrix
from capmatrix import KernelQuery, Verdict
from capmatrix.authoring._validate.composition import MAX_CHAIN
from capmatrix.authoring.export import export
from capmatrix.errors import CapabilityErrors

if TYPE_CHECKING:
    from conftest import WriteMatrix

    from capmatrix.model import Role

#: Two roles that ask first and the roles they ask (small matrix: kernels xqa and fallback).
COMPOSED = """\
roles:
  overrides:
    description: per-model choices
    orders:
      - when: {attention: mla, sm: sm_12x}
        candidates: [xqa]
      - when: {attention: mla}
        candidates: [fallback, xqa]
  more:
    description: asked after the overrides
    orders:
      - when: {kv: fp8}
        candidates: [fallback]
  chosen:
    description: the engine's choice
    asks_first: [overrides, more]
    orders:
      - when: {sm: ">=120"}
        candidates: [xqa]
      - candidates: [fallback, xqa]
  deeper:
    description: asks the overrides first, then its own
    asks_first: [overrides]
    orders:
      - when: {beam: 4}
        candidates: [fallback]
  listed:
    description: a role of candidates that asks first
    asks_first: [deeper]
    candidates: [xqa]
"""


def problems(write_matrix: WriteMatrix, roles: str) -> list[tuple[str | None, str]]:
    """(code, the rendered problem) of every problem of the small matrix with ``roles`` as roles.yaml."""
    root = write_matrix({"roles.yaml": roles})
    with pytest.raises(CapabilityErrors) as caught:
        capmatrix.load(root)
    return [(p.code, str(p).replace(str(root) + "/", "")) for p in caught.value.errors]


def test_orders_are_the_asked_roles_then_the_roles_own(write_matrix: WriteMatrix) -> None:
    m = capmatrix.load(write_matrix({"roles.yaml": COMPOSED}))
    chosen, overrides, more = m.roles["chosen"], m.roles["overrides"], m.roles["more"]
    assert chosen.asks_first == ("overrides", "more")
    own = len(chosen.orders) - len(overrides.orders) - len(more.orders)
    assert own == 2
    def written(role: Role) -> list[tuple[object, ...]]:  # what was written, not the area it gets
        return [(o.when, o.candidates, o.location) for o in role.orders]

    assert written(chosen)[:3] == [*written(overrides), *written(more)]
    assert [o.location.line for o in chosen.orders[3:]] == [18, 20]
    assert chosen.candidates == ("xqa", "fallback")  # first seen, in the composed order
    # Composition is transitive; a role of candidates asks them last, for every query.
    listed, deeper = m.roles["listed"], m.roles["deeper"]
    assert written(deeper)[:2] == written(overrides)
    assert written(listed)[:-1] == written(deeper)
    assert listed.orders[-1].when == ()
    assert listed.orders[-1].location == listed.location
    assert listed.orders[-1].candidates == ("xqa",)
    assert overrides.asks_first == more.asks_first == ()


@pytest.mark.parametrize(("values", "kernel", "verdict"), [
    # the first override decides, though its only candidate is not supported: no fall-through
    ({"attention": "mla", "sm": 120, "kv": "bf16"}, None, Verdict.UNSUPPORTED),
    ({"attention": "mla", "sm": 120, "kv": "fp8", "spec_dec": "none"}, "xqa", Verdict.SUPPORTED),
    ({"attention": "mla", "sm": 90, "kv": "bf16"}, "fallback", Verdict.SUPPORTED),
    ({"attention": "gqa", "sm": 90, "kv": "fp8"}, "fallback", Verdict.SUPPORTED),  # the second role
    ({"attention": "gqa", "sm": 121, "kv": "bf16"}, "xqa", Verdict.SUPPORTED),  # the role's own
    ({"attention": "gqa", "sm": 90, "kv": "bf16"}, "fallback", Verdict.SUPPORTED),
])
def test_selection_takes_the_first_order_that_holds(
    write_matrix: WriteMatrix, values: dict[str, object], kernel: str | None, verdict: Verdict,
) -> None:
    m = capmatrix.load(write_matrix({"roles.yaml": COMPOSED}))
    picked = capmatrix.select("chosen", KernelQuery().replace(**values), m)
    assert (picked.kernel, picked.verdict) == (kernel, verdict)
    if kernel is None:  # the override's kernel says why, as the engine's later refusal would
        assert [r.query.kernel for r in picked.trace] == ["xqa"]
        assert picked.trace[0].reasons


def test_the_export_carries_the_composed_role(write_matrix: WriteMatrix) -> None:
    m = capmatrix.load(write_matrix({"roles.yaml": COMPOSED}))
    role = export(m)["roles"]["chosen"]
    assert role["asks_first"] == ["overrides", "more"]
    assert len(role["orders"]) == len(m.roles["chosen"].orders) == 5
    assert "asks_first" not in export(m)["roles"]["overrides"]


_ROLES_HEAD = """\
roles:
  overrides:
    description: per-model choices
    orders:
      - when: {attention: mla}
        candidates: [xqa]
"""


@pytest.mark.parametrize(("tail", "expected"), [
    ("  chosen:\n    description: c\n    asks_first: [overide]\n    candidates: [xqa]\n",
     [("E248", ("roles.yaml:9:18: roles.chosen.asks_first[0]: unknown role 'overide' (did you mean "
               "'overrides'?)"))]),
    ("  chosen:\n    description: c\n    asks_first: [chosen]\n    candidates: [xqa]\n",
     [("E248", ("roles.yaml:9:18: roles.chosen.asks_first[0]: role 'chosen' names itself (name the roles "
               "it asks before its own orders)"))]),
    ("  chosen:\n    description: c\n    asks_first: [overrides, overrides]\n    candidates: [xqa]\n",
     [("E248", "roles.yaml:9:29: roles.chosen.asks_first[1]: role 'overrides' is named twice")]),
    ("  chosen:\n    description: c\n    asks_first: [gen]\n    candidates: [xqa]\n",
     [("E248", ("roles.yaml:9:18: roles.chosen.asks_first[0]: role 'gen' has an order for every query (its "
               "'candidates', or a last order without 'when'), so no order of role 'chosen' would ever "
               "apply (give every order of 'gen' a 'when', or list its candidates in 'chosen''s own "
               "orders)"))]),
    (("  a:\n    description: a\n    asks_first: [b]\n    candidates: [xqa]\n"
     "  b:\n    description: b\n    asks_first: [a]\n    orders:\n      - when: {sm: 90}\n"
     "        candidates: [xqa]\n"),
     [("E248", ("roles.yaml:13:18: roles.b.asks_first[0]: roles ask each other first: 'a' -> 'b' -> 'a' "
               "(one role of the cycle must list its orders itself)"))]),
    (("  chosen:\n    description: c\n    asks_first: [overrides]\n    axes: {kv: fp8}\n"
     "    candidates: [xqa]\n"),
     [("E249", ("roles.yaml:9:18: roles.chosen.asks_first[0]: role 'overrides' pins nothing and role "
               "'chosen' pins {kv: fp8}: a role asks first only roles that pin the same values (pins "
               "apply to every order of the composed role; give both the same 'axes')"))]),
    (("  chosen:\n    description: c\n    asks_first: [overrides]\n    orders:\n"
     "      - when: {attention: mla, sm: 90}\n        candidates: [fallback]\n"
     "      - candidates: [xqa]\n"),
     [("E243", ("roles.yaml:11:15: roles.chosen.orders[0].when: this order never applies: the orders of "
               "'overrides' (asks_first) and earlier orders take every query it names"))]),
    (("  chosen:\n    description: c\n    asks_first: [overrides, more]\n    candidates: [xqa]\n"
     "  more:\n    description: m\n    orders:\n      - when: {attention: [mha, gqa]}\n"
     "        candidates: [fallback]\n"),
     [("E243", ("roles.yaml:10:17: roles.chosen.candidates: this order never applies: the orders of "
               "'overrides', 'more' (asks_first) and earlier orders take every query it names"))]),
    ("  chosen:\n    description: c\n    asks_first: overrides\n    candidates: [xqa]\n",
     [("E103", "roles.yaml:9:17: roles.chosen.asks_first: 'overrides' is not of type 'array'")]),
])
def test_each_misuse_is_reported_where_it_is_written(
    write_matrix: WriteMatrix, tail: str, expected: list[tuple[str, str]],
) -> None:
    assert problems(write_matrix, _ROLES_HEAD + tail) == expected


def test_every_misuse_of_one_load_is_reported(write_matrix: WriteMatrix) -> None:
    """An unknown name does not stop the rest of the list composing, nor other roles being checked."""
    tail = ("  chosen:\n    description: c\n    asks_first: [nope, overrides]\n    candidates: [xqa]\n"
            "  other:\n    description: o\n    asks_first: [other]\n    candidates: [xqa]\n")
    found = problems(write_matrix, _ROLES_HEAD + tail)
    assert [(code, text.split(": ", 2)[0]) for code, text in found] == [
        ("E248", "roles.yaml:9:18"), ("E248", "roles.yaml:13:18")]


def test_a_role_that_asks_a_left_out_role_is_left_out_with_it(write_matrix: WriteMatrix) -> None:
    """Isolated from a broken engine file, the role asked first goes, and so does the role asking it."""
    broken = """\
kernels:
  engine_kernel:
    engine: eng
    description: an engine's kernel
    rules:
      - {id: engine_kernel.all, grant: {sm_typo: 90}, reason: r, source: s, status: untested}
"""
    roles = ("roles:\n  overrides:\n    description: o\n    orders:\n      - when: {attention: mla}\n"
             "        candidates: [engine_kernel]\n"
             "  chosen:\n    description: c\n    asks_first: [overrides]\n    candidates: [xqa]\n")
    m = capmatrix.load(write_matrix({"kernels/eng.yaml": broken, "roles.yaml": roles}), isolate=True)
    assert {"overrides", "chosen"} <= set(m.quarantine)
    assert "gen" in m.roles
    with pytest.raises(CapabilityErrors):
        capmatrix.select("chosen", KernelQuery(sm=90), m)


def test_a_chain_of_roles_asking_first_is_bounded(write_matrix: WriteMatrix) -> None:
    """Composing follows the chain; thousands of roles chained would exhaust the stack, so it is cut."""
    count = MAX_CHAIN + 5
    roles = "roles:\n" + "".join(
        f"  r{i}:\n    description: d\n" + (f"    asks_first: [r{i + 1}]\n" if i < count - 1 else "")
        + f'    orders:\n      - when: {{beam: ">={i + 1}"}}\n        candidates: [xqa]\n'
        for i in range(count))
    found = problems(write_matrix, roles)
    assert [code for code, _text in found] == ["E248"]
    assert f"more than {MAX_CHAIN} roles asking first (from 'r0')" in found[0][1]
    # Within the bound the same chain composes.
    short = roles.replace(f"    asks_first: [r{MAX_CHAIN}]\n", "")
    m = capmatrix.load(write_matrix({"roles.yaml": short}))
    assert len(m.roles["r0"].orders) == MAX_CHAIN

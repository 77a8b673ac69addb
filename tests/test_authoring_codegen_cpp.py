"""The generated C++17 header, compiled with the system g++, answers like Python on every cell.

The header covers the XQA kernel, the TensorRT-LLM gates (the kernels of trtllm_gates.yaml) and the
trtllm_generation role (which brings its candidates). A driver, generated here from the artifact,
reads queries from stdin and answers them through the header's public API (the typed setters,
``resolve``, ``select``). Python writes every query, the driver answers them in bulk, and each answer is
compared with ``capmatrix.resolve`` / ``capmatrix.select``:

- every cell of the universe of XQA and of each gate (the product of the axes its rules name), shown
  in three parts: the header maps every listed value of every axis to its index (``I``), its rule
  masks are the matrix's rules bit for bit (``M``), and it answers every combination of the kernel's
  value classes (per axis, the listed values that every rule of the kernel admits or refuses alike),
  in blocks: the resolver answers a block with its trailing axes open (verdict and residual), the
  driver answers the same open query and then every cell of it over the classes' representatives
  as a complete query. A complete query with listed values is answered from its values' indices and
  the rule masks alone (``cell_supported``), so two values of one class answer alike in every cell:
  the three parts cover every cell. ``CAPMATRIX_EXHAUSTIVE=1`` (``make exhaustive``) answers every
  cell itself instead (XQA has over a billion: minutes);
- random complete queries, with int values outside the universe, for every kernel of the header;
- random queries leaving random axes open (supported / unsupported / depends);
- role selections: random complete queries and every model x SM x speculative-decoding mode.

Skipped only when g++ is missing.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import random
import shutil
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
from test_authoring_export import ROUND_TRIP_BLOCK_CELLS, _blocks, _residual_bitmap

import capmatrix
from capmatrix import ANY, KernelQuery
from capmatrix._core.start import refused_at_start
from capmatrix.authoring.cli import run
from capmatrix.authoring.codegen import CodegenError, cpp_header
from capmatrix.authoring.codegen.cpp import _camel, _comment, _constant, _method, _type
from capmatrix.authoring.export import export
from capmatrix.resolver import compile_matrix

GXX = shutil.which("g++")
ROLE = "trtllm_generation"
GATES_FILE = "capabilities/kernels/trtllm_gates.yaml"
SAMPLES = 400
#: Blocks of the every-cell test answered by one run of the driver.
CHUNK_BLOCKS = 5000
#: Every cell answered by the driver, not every combination of classes (``make exhaustive``).
EXHAUSTIVE = os.environ.get("CAPMATRIX_EXHAUSTIVE", "") not in ("", "0")
VERDICT = {"0": "unsupported", "1": "supported", "2": "depends"}

needs_gxx = pytest.mark.skipif(GXX is None, reason="g++ not found; install a C++17 compiler to run")


@pytest.fixture(scope="module")
def matrix() -> capmatrix.Matrix:
    return capmatrix.load()


@pytest.fixture(scope="module")
def data(matrix: capmatrix.Matrix) -> dict[str, Any]:
    return export(matrix)


def _chosen(data: dict[str, Any]) -> list[str]:
    gates = [k for k, v in data["kernels"].items() if v["location"]["file"] == GATES_FILE]
    assert gates, "no gate in trtllm_gates.yaml"
    return ["xqa", *gates]


def _driver(data: dict[str, Any], axes: list[str]) -> str:
    """A C++ program answering queries from stdin through the header's API.

    Lines: ``R k t...`` resolve kernel k; ``S r t...`` select role r; ``B k n a... t...`` the open
    query with axes a... open, then every cell of it (first open axis fastest) over the axes' block
    universes: its verdict, the cell count, the supported cells' count and the CRC-32 (zlib's) of the
    cells as bytes, cell i being bit i%8 of byte i//8 (a wide block's cells would be megabytes of
    text; any burst of differing cells changes the CRC, and the counts are exact). ``U a m t...``
    sets axis a's block universe to the m values given (``ok``; initially every listed value).
    ``I``: per axis, the index each listed value gets when set on a query. ``M k``: per rule of
    kernel k, grant (1) or not, then per axis its mask (``*`` where the rule names no condition). A token
    per header axis: ``*`` open, ``.`` unset, ``none`` an optional int axis's ``kNone``, else the value
    (enum: its index; bool: 0/1).
    """
    setters, universes = [], []
    for i, axis in enumerate(axes):
        spec = data["axes"][axis]
        values: list[object]
        if spec["type"] == "enum":
            call = f"q.{_method(axis)}(static_cast<capmatrix::{_camel(axis)}>(v))"
            values = list(range(len(spec["values"])))
        elif spec["type"] == "bool":
            call = f"q.{_method(axis)}(v != 0)"
            values = [int(v) for v in spec["values"]]
        else:
            call = f"q.{_method(axis)}(v)"
            values = ["capmatrix::kNone" if v == "none" else v for v in spec["values"]]
        setters.append(f"    case {i}: {call}; break;")
        universes.append("{" + ", ".join(map(str, values)) + "}")
    width = max(len(data["axes"][a]["values"]) for a in axes)
    return "\n".join([
        '#include "capmatrix_generated.h"',
        "#include <cstdint>",
        "#include <iostream>",
        "#include <string>",
        "#include <vector>",
        "",
        "static void set(capmatrix::Query& q, int axis, std::int64_t v) {",
        "  switch (axis) {",
        *setters,
        "    default: break;",
        "  }",
        "}",
        f"static const std::int64_t kUniverse[][{width}] = {{{', '.join(universes)}}};",
        f"static const int kSize[] = {{{', '.join(str(len(data['axes'][a]['values'])) for a in axes)}}};",
        "static std::vector<std::vector<std::int64_t>> g_block(capmatrix::kAxisCount);",
        "",
        "static std::int64_t read_value(std::istream& in) {",
        "  std::string t;",
        "  in >> t;",
        '  return t == "none" ? capmatrix::kNone : std::stoll(t);',
        "}",
        "",
        "// CRC-32 as zlib computes it (reflected, polynomial 0xEDB88320), one byte at a time.",
        "static std::uint32_t crc_byte(std::uint32_t crc, unsigned byte) {",
        "  crc ^= byte & 0xFFu;",
        "  for (int k = 0; k < 8; ++k) { crc = (crc & 1u) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1; }",
        "  return crc;",
        "}",
        "",
        "static capmatrix::Query read_query(std::istream& in) {",
        "  capmatrix::Query q;",
        "  for (std::size_t a = 0; a < capmatrix::kAxisCount; ++a) {",
        "    std::string t;",
        "    in >> t;",
        '    if (t == "*") { q.open(static_cast<capmatrix::AxisId>(a)); }',
        '    else if (t == "none") { set(q, static_cast<int>(a), capmatrix::kNone); }',
        '    else if (t != ".") { set(q, static_cast<int>(a), std::stoll(t)); }',
        "  }",
        "  return q;",
        "}",
        "",
        "int main() {",
        "  std::ios::sync_with_stdio(false);",
        "  for (std::size_t a = 0; a < capmatrix::kAxisCount; ++a) {",
        "    g_block[a].assign(kUniverse[a], kUniverse[a] + kSize[a]);",
        "  }",
        "  std::string op;",
        "  while (std::cin >> op) {",
        '    if (op == "U") {',
        "      int a, m; std::cin >> a >> m;",
        "      g_block[static_cast<std::size_t>(a)].clear();",
        "      auto& block = g_block[static_cast<std::size_t>(a)];",
        "      for (int j = 0; j < m; ++j) { block.push_back(read_value(std::cin)); }",
        '      std::cout << "ok\\n";',
        '    } else if (op == "I") {',
        "      for (std::size_t a = 0; a < capmatrix::kAxisCount; ++a) {",
        "        for (int j = 0; j < kSize[a]; ++j) {",
        "          capmatrix::Query q;",
        "          set(q, static_cast<int>(a), kUniverse[a][j]);",
        '          std::cout << (j ? " " : "") << q.index_[a];',
        "        }",
        "        std::cout << '\\n';",
        "      }",
        '    } else if (op == "M") {',
        "      int k; std::cin >> k;",
        "      const auto& rules = capmatrix::detail::kKernels[static_cast<std::size_t>(k)];",
        "      for (auto r = rules.begin; r < rules.end; ++r) {",
        "        const auto& rule = capmatrix::detail::kRules[r];",
        "        std::cout << (rule.grant ? 1 : 0);",
        "        for (std::size_t a = 0; a < capmatrix::kAxisCount; ++a) {",
        "          if (rule.named >> a & 1u) { std::cout << ' ' << rule.mask[a]; }",
        '          else { std::cout << " *"; }',
        "        }",
        "        std::cout << '\\n';",
        "      }",
        '    } else if (op == "R") {',
        "      int k; std::cin >> k;",
        "      capmatrix::Query q = read_query(std::cin);",
        "      const auto kernel = static_cast<capmatrix::Kernel>(k);",
        "      std::cout << static_cast<int>(capmatrix::resolve(kernel, q)) << '\\n';",
        '    } else if (op == "S") {',
        "      int r; std::cin >> r;",
        "      capmatrix::Query q = read_query(std::cin);",
        "      capmatrix::Selection s = capmatrix::select(static_cast<capmatrix::Role>(r), q);",
        "      std::cout << (s.found ? capmatrix::to_string(s.kernel) : \"-\") << ' '",
        "                << static_cast<int>(s.verdict) << '\\n';",
        '    } else if (op == "B") {',
        "      int k, n; std::cin >> k >> n;",
        "      std::vector<int> open(static_cast<std::size_t>(n));",
        "      for (int& a : open) { std::cin >> a; }",
        "      capmatrix::Query q = read_query(std::cin);",
        "      const auto kernel = static_cast<capmatrix::Kernel>(k);",
        "      const int verdict = static_cast<int>(capmatrix::resolve(kernel, q));",
        "      std::vector<int> at(static_cast<std::size_t>(n), 0);",
        "      for (int i = 0; i < n; ++i) {",
        "        set(q, open[i], g_block[static_cast<std::size_t>(open[i])][0]);",
        "      }",
        "      std::uint32_t crc = 0xFFFFFFFFu;",
        "      long cells = 0, yes = 0;",
        "      unsigned byte = 0;",
        "      for (;;) {",
        "        const bool ok = capmatrix::supported(kernel, q);",
        "        yes += ok ? 1 : 0;",
        "        byte |= (ok ? 1u : 0u) << (cells % 8);",
        "        if (++cells % 8 == 0) { crc = crc_byte(crc, byte); byte = 0; }",
        "        int i = 0;",
        "        for (; i < n; ++i) {",
        "          const auto& block = g_block[static_cast<std::size_t>(open[i])];",
        "          const bool more = static_cast<std::size_t>(++at[i]) < block.size();",
        "          if (!more) { at[i] = 0; }",
        "          set(q, open[i], block[static_cast<std::size_t>(at[i])]);",
        "          if (more) { break; }",
        "        }",
        "        if (i == n) { break; }",
        "      }",
        "      if (cells % 8 != 0) { crc = crc_byte(crc, byte); }",
        "      std::cout << verdict << ' ' << cells << ' ' << yes << ' ' << (crc ^ 0xFFFFFFFFu) << '\\n';",
        "    }",
        "  }",
        "  return 0;",
        "}",
        "",
    ])


@pytest.fixture(scope="module")
def program(data: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    if GXX is None:
        pytest.skip("g++ not found; install a C++17 compiler to run")
    folder = tmp_path_factory.mktemp("cpp")
    header = cpp_header(data, _chosen(data), [ROLE], command="test")
    (folder / "capmatrix_generated.h").write_text(header, encoding="utf-8")
    named = {a for k in _kernels_in(data) for a in data["kernels"][k]["relevant_axes"]}
    axes = [a for a in data["axes"] if a in named]
    assert f"constexpr std::size_t kAxisCount = {len(axes)};" in header
    (folder / "driver.cpp").write_text(_driver(data, axes), encoding="utf-8")
    binary = folder / "driver"
    subprocess.run(
        [GXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O2",
         str(folder / "driver.cpp"), "-o", str(binary)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    return binary, axes


def _kernels_in(data: dict[str, Any]) -> list[str]:
    chosen = _chosen(data)
    chosen.extend(c for c in data["roles"][ROLE]["candidates"] if c not in chosen)
    return chosen


def _token(data: dict[str, Any], axis: str, value: object) -> str:
    if value is ANY:
        return "*"
    spec = data["axes"][axis]
    if spec["type"] == "enum":
        return str(spec["values"].index(value))
    if value == "none":  # an optional int axis not given: the driver passes kNone
        assert spec.get("optional"), axis
        return "none"
    return str(int(value))  # type: ignore[call-overload]


def _tokens(data: dict[str, Any], axes: list[str], values: dict[str, object]) -> str:
    return " ".join(_token(data, a, values[a]) if a in values else "." for a in axes)


def _run(binary: Path, lines: list[str]) -> list[str]:
    done = subprocess.run([str(binary)], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, check=True, timeout=600)
    out = done.stdout.splitlines()
    assert len(out) == len(lines)
    return out


def _classes(data: dict[str, Any], kernel: str, axis: str) -> list[list[int]]:
    """The kernel's value classes on ``axis``: indices of listed values every rule admits or refuses alike."""
    values = data["axes"][axis]["values"]
    boxes = [rule["box"].get(axis) for rule in data["kernels"][kernel]["rules"]]
    found: dict[tuple[bool, ...], list[int]] = {}
    for j, value in enumerate(values):
        found.setdefault(tuple(box is None or value in box for box in boxes), []).append(j)
    return list(found.values())


@needs_gxx
def test_every_listed_value_is_set_at_its_index(
    program: tuple[Path, list[str]], data: dict[str, Any]
) -> None:
    binary, axes = program
    done = subprocess.run([str(binary)], input="I\n", capture_output=True, text=True, check=True, timeout=60)
    rows = done.stdout.splitlines()
    assert rows == [" ".join(map(str, range(len(data["axes"][a]["values"])))) for a in axes]


@needs_gxx
def test_rule_masks_are_the_matrix_rules(program: tuple[Path, list[str]], data: dict[str, Any]) -> None:
    binary, axes = program
    for k, kernel in enumerate(_kernels_in(data)):
        done = subprocess.run([str(binary)], input=f"M {k}\n", capture_output=True, text=True, check=True,
                              timeout=60)
        rules = data["kernels"][kernel]["rules"]
        got = [line.split() for line in done.stdout.splitlines()]
        assert len(got) == len(rules), kernel
        for rule, (grant, *masks) in zip(rules, got, strict=True):
            assert grant == ("1" if rule["effect"] == "grant" else "0"), rule["id"]
            for axis, mask in zip(axes, masks, strict=True):
                values = data["axes"][axis]["values"]
                admitted = rule["box"].get(axis, values)
                want = sum(1 << j for j, v in enumerate(values) if v in admitted)
                # A rule that names no condition on the axis admits every value there.
                assert ((1 << len(values)) - 1 if mask == "*" else int(mask)) == want, (rule["id"], axis)


@pytest.mark.sweep  # every combination of value classes; every cell in make exhaustive
@needs_gxx
@pytest.mark.parametrize("which", ["xqa", "gates"])
def test_every_cell_of_xqa_and_the_gates(
    which: str, program: tuple[Path, list[str]], data: dict[str, Any], matrix: capmatrix.Matrix
) -> None:
    binary, axes = program
    chosen = _chosen(data)
    kernels = chosen[:1] if which == "xqa" else chosen[1:]
    for kernel in kernels:
        k = _kernels_in(data).index(kernel)
        fixed_axes, open_axes = _blocks(data, kernel, ROUND_TRIP_BLOCK_CELLS)
        named = set(data["kernels"][kernel]["relevant_axes"])
        rest = {a: data["axes"][a]["values"][0] for a in data["axes"] if a not in named}
        # Per named axis, the listed values asked: every one, or each class's first.
        picks = {a: list(range(len(data["axes"][a]["values"]))) if EXHAUSTIVE
                 else [members[0] for members in _classes(data, kernel, a)] for a in named}
        universe = [f"U {axes.index(a)} {len(picks[a])} "
                    + " ".join(_token(data, a, data["axes"][a]["values"][j]) for j in picks[a])
                    for a in open_axes]
        assert _run(binary, universe) == ["ok"] * len(universe)
        opened = " ".join(str(axes.index(a)) for a in open_axes)
        combos = itertools.product(*([data["axes"][a]["values"][j] for j in picks[a]] for a in fixed_axes))
        cells = 0
        # In chunks of blocks (XQA has over a billion cells), one driver run each chunk.
        while chunk := list(itertools.islice(combos, CHUNK_BLOCKS)):
            lines, expected = list(universe), []
            for combo in chunk:
                values: dict[str, object] = {**rest, **dict(zip(fixed_axes, combo, strict=True))}
                query = KernelQuery(kernel).replace(**values, **dict.fromkeys(open_axes, ANY))
                resolution = capmatrix.resolve(query, matrix)
                bitmap = _residual_bitmap(resolution, open_axes, matrix, picks=picks)
                full = (1 << math.prod(len(picks[a]) for a in open_axes)) - 1
                listed = "supported" if bitmap == full else "unsupported" if not bitmap else "depends"
                expected.append((listed, bitmap))
                given = {**values, **dict.fromkeys(open_axes, ANY)}
                lines.append(f"B {k} {len(open_axes)} {opened} {_tokens(data, axes, given)}")
            answers = _run(binary, lines)[len(universe):]
            for line, answer, (verdict, bitmap) in zip(lines[len(universe):], answers, expected, strict=True):
                got_verdict, count, yes, crc = answer.split()
                assert VERDICT[got_verdict] == verdict, (kernel, line)
                assert int(yes) == bitmap.bit_count(), (kernel, line)
                as_bytes = bitmap.to_bytes((int(count) + 7) // 8, "little")
                assert int(crc) == zlib.crc32(as_bytes), (kernel, line)
                cells += int(count)
        assert cells == math.prod(len(picks[a]) for a in named)


def _random_value(data: dict[str, Any], axis: str, rng: random.Random) -> object:
    spec = data["axes"][axis]
    if spec["type"] == "int" and rng.random() < 0.1:
        # an unlisted int that is an input (the header takes ints its engine validated: min / max)
        return rng.choice([v for v in (0, 3, 40, 70, 130, 1000) if v >= spec.get("min", 0)])
    return rng.choice(spec["values"])


@needs_gxx
def test_random_complete_and_open_queries(
    program: tuple[Path, list[str]], data: dict[str, Any], matrix: capmatrix.Matrix
) -> None:
    binary, axes = program
    rng = random.Random("codegen")  # noqa: S311 - a reproducible sample
    lines, expected = [], []
    for k, kernel in enumerate(_kernels_in(data)):
        for i in range(SAMPLES):
            values: dict[str, object] = {a: _random_value(data, a, rng) for a in data["axes"]}
            if i % 2:  # leave some axes open (those without a default), or unset (to the default)
                for axis in rng.sample(axes, rng.randint(1, 4)):
                    if "default" in data["axes"][axis] and rng.random() < 0.5:
                        values.pop(axis)
                    else:
                        values[axis] = ANY
            verdict = capmatrix.resolve(KernelQuery(kernel).replace(**values), matrix).verdict
            lines.append(f"R {k} {_tokens(data, axes, values)}")
            expected.append(str(verdict))
    got = [VERDICT[a] for a in _run(binary, lines)]
    assert got == expected
    assert {"supported", "unsupported", "depends"} <= set(got)


@needs_gxx
def test_role_selection(program: tuple[Path, list[str]], data: dict[str, Any],
                        matrix: capmatrix.Matrix) -> None:
    binary, axes = program
    rng = random.Random("codegen-role")  # noqa: S311 - a reproducible sample
    pinned = data["roles"][ROLE]["axes"]
    lines, expected = [], []
    for i in range(4 * SAMPLES):
        values: dict[str, object] = {a: rng.choice(data["axes"][a]["values"]) for a in data["axes"]}
        if i % 2:
            for axis in pinned:
                values.pop(axis, None)
        selection = capmatrix.select(ROLE, KernelQuery().replace(**values), matrix)
        lines.append(f"S 0 {_tokens(data, axes, values)}")
        expected.append(f"{selection.kernel or '-'} {selection.verdict!s}")
    for model, sm, mode in itertools.product(
        data["models"], data["axes"]["sm"]["values"], data["axes"]["spec_dec"]["values"]
    ):
        query = KernelQuery(model=model, sm=sm, spec_dec=mode)
        selection = capmatrix.select(ROLE, query, matrix)
        own = {a: v for a, v in data["models"][model]["axes"].items() if a not in pinned}
        lines.append(f"S 0 {_tokens(data, axes, {**own, 'sm': sm, 'spec_dec': mode})}")
        expected.append(f"{selection.kernel or '-'} {selection.verdict!s}")
    # The role's order reads attention and sm: left open, the choice of list is undecided.
    for sm, dtype in itertools.product(data["axes"]["sm"]["values"], ("bf16", "fp16")):
        values = {"sm": sm, "dtype": dtype, "kv_cache_dtype": dtype, "head_dim": 576}
        for attention in (None, "mla", "gqa"):
            asked = values if attention is None else {**values, "attention": attention}
            selection = capmatrix.select(ROLE, KernelQuery().replace(**asked), matrix)
            lines.append(f"S 0 {_tokens(data, axes, asked)}")
            expected.append(f"{selection.kernel or '-'} {selection.verdict!s}")
    got = []
    for answer in _run(binary, lines):
        kernel, verdict = answer.split()
        got.append(f"{kernel} {VERDICT[verdict]}")
    assert got == expected
    assert len({g.split()[0] for g in got}) >= 3
    assert "- depends" in got[-6 * len(data["axes"]["sm"]["values"]):]  # undecided orders


def test_errors_name_what_is_wrong(data: dict[str, Any]) -> None:
    with pytest.raises(CodegenError, match="unknown kernel 'nope'"):
        cpp_header(data, ["nope"])
    with pytest.raises(CodegenError, match="unknown role 'nope'"):
        cpp_header(data, [], ["nope"])
    axes = {**data["axes"], "tokens_per_block": {**data["axes"]["tokens_per_block"], "values": [8, 16]}}
    with pytest.raises(CodegenError, match="optional axis 'tokens_per_block' has no 'none'"):
        cpp_header({**data, "axes": axes}, ["xqa"])
    classed = [k for k, v in data["kernels"].items()
               if any("signatures" in c for r in v["rules"] for c in r["conditions"].values())]
    assert classed, "no kernel of the shipped matrix has a rule on a derived axis"
    with pytest.raises(CodegenError, match=f"kernel '{classed[0]}': rule .* has a class condition on"):
        cpp_header(data, classed[:1])
    # Orders on base axes are expressed (trtllm_generation's); one reading a derived axis is refused.
    assert data["roles"][ROLE].get("orders")
    # No shipped role reads one: an order of trtllm_generation is made to read a derived axis.
    derived = next(iter(data["derived"]))
    role = data["roles"][ROLE]
    orders = [{**role["orders"][0], "when": [{**role["orders"][0]["when"][0], derived: {"values": []}}]},
              *role["orders"][1:]]
    reading = {**data, "roles": {**data["roles"], ROLE: {**role, "orders": orders}}}
    with pytest.raises(CodegenError, match=f"role '{ROLE}': an order reads '{derived}', a derived axis"):
        cpp_header(reading, [], [ROLE])
    # An order on an optional axis is expressed (its 'none' is a universe value).
    optional = [r for r, v in data["roles"].items()
                if any(data["axes"][a].get("optional")
                       for o in v.get("orders", ()) for b in o["when"] for a in b)]
    assert optional, "no role of the shipped matrix has an order on an optional axis"
    assert "inline Selection select(Role role" in cpp_header(data, [], optional[:1])
    with pytest.raises(CodegenError, match="at least one"):
        cpp_header(data, [])
    with pytest.raises(CodegenError, match="namespace"):
        cpp_header(data, ["xqa"], namespace="not a name")
    with pytest.raises(CodegenError, match="format version 1"):
        cpp_header({**data, "format_version": "2.0"}, ["xqa"])


def test_identifiers() -> None:
    assert _constant("first_chain_draft") == "kFirstChainDraft"
    assert _camel("kv_cache_dtype") == "KvCacheDtype"
    assert _method("default") == "default_"
    assert _method("open") == "open_"
    assert _method("head_dim") == "head_dim"


def test_cli_writes_the_header(tmp_path: Path) -> None:
    from capmatrix.authoring.cli import main

    target = tmp_path / "gates.h"
    assert main(["codegen", "cpp", "--kernel", "xqa", "--role", ROLE, "--out", str(target)]) == 0
    text = target.read_text(encoding="utf-8")
    assert "capmatrix codegen cpp --kernel xqa --role trtllm_generation" in text
    assert "inline Selection select(Role role" in text
    assert main(["codegen", "cpp", "--kernel", "nope", "--out", str(target)]) == 2


@needs_gxx
def test_the_integration_example_compiles(data: dict[str, Any], tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "integration.md").read_text(encoding="utf-8")
    section = text.split("## The C++ side: a generated header", 1)[1]
    command = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    example = section.split("```cpp\n", 1)[1].split("```", 1)[0]
    words = command.split()
    kernels = words[words.index("--kernel") + 1: words.index("--role")]
    roles = words[words.index("--role") + 1: words.index("--out")]
    (tmp_path / words[-1]).write_text(cpp_header(data, kernels, roles), encoding="utf-8")
    source = tmp_path / "example.cpp"
    source.write_text(example + "\nint main() { return XqaSupport(120, false, 64, 8, 128, false)"
                      ".shouldUse(true, 1, 32) ? 0 : 1; }\n", encoding="utf-8")
    assert GXX is not None
    subprocess.run([GXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", str(source),
                    "-o", str(tmp_path / "example")], check=True, capture_output=True, text=True,
                   timeout=300)
    # Llama-style GQA, one-model spec-dec on SM120: XQA is usable (the seed question).
    assert subprocess.run([str(tmp_path / "example")], check=False, timeout=60).returncode == 0


#: tokens_per_block values no list of the shipped matrix names, beside its own (and none).
_UNLISTED_BLOCKS = [1, 6, 24, 48, 96, 256, 4096, 1 << 40]  # inputs: tokens_per_block has min 1


@needs_gxx
def test_tokens_per_block_none_and_given(
    program: tuple[Path, list[str]], data: dict[str, Any], matrix: capmatrix.Matrix
) -> None:
    """Complete queries that differ only in tokens_per_block: none, each listed value, unlisted ones."""
    binary, axes = program
    assert data["axes"]["tokens_per_block"].get("optional")
    blocks: list[object] = list(data["axes"]["tokens_per_block"]["values"])
    assert "none" in blocks
    blocks += _UNLISTED_BLOCKS
    rng = random.Random("codegen-none")  # noqa: S311 - a reproducible sample
    lines, expected = [], []
    keys: list[tuple[str, tuple[tuple[str, object], ...], object]] = []
    for k, kernel in enumerate(_kernels_in(data)):
        if "tokens_per_block" not in data["kernels"][kernel]["relevant_axes"]:
            continue
        bases = [{a: rng.choice(data["axes"][a]["values"]) for a in data["axes"]}
                 for _ in range(SAMPLES // 4)]
        if kernel == "xqa":  # a base the kernel supports, so that the block size decides
            known, _origins, _open = compile_matrix(matrix).effective_values(
                KernelQuery("xqa", model="llama", sm=90, phase="generation", spec_dec="none"))
            bases.append({a: known.get(a, data["axes"][a]["values"][0]) for a in data["axes"]})
        for base in bases:
            for block in blocks:
                values = {**base, "tokens_per_block": block}
                verdict = capmatrix.resolve(KernelQuery(kernel).replace(**values), matrix).verdict
                lines.append(f"R {k} {_tokens(data, axes, values)}")
                expected.append(str(verdict))
                keys.append((kernel, tuple(sorted(base.items(), key=str)), block))
    got = [VERDICT[a] for a in _run(binary, lines)]
    assert got == expected
    by_base: dict[tuple[str, tuple[tuple[str, object], ...]], dict[object, str]] = {}
    for (name, fixed, block), answer in zip(keys, got, strict=True):
        by_base.setdefault((name, fixed), {})[block] = answer
    # The axis matters: some query is supported with none (not checked) and not with a given value.
    assert any(v["none"] == "supported" and "unsupported" in v.values() for v in by_base.values())
    assert {name for name, _ in by_base} >= {"xqa", "trtllm_gen"}


#: A matrix whose rules put every kind of condition on optional axes: an int one without a default
#: (none), an int one with a default, an enum one; grants and exclusions; roles pinning none or a value;
#: an engine's kernel, asked alone with its engine's default (none) where the axis's is 32.
_OPTIONAL_MATRIX = {
    "axes.yaml": """\
axes:
  block: {type: int, optional: true, description: a block size, values: [8, 16, 32, 64, 128]}
  page:
    type: int
    optional: true
    default: 32
    description: a page size
    values: [16, 32, 64]
    engine_defaults: {vllm: none}
  backend: {type: enum, optional: true, description: a backend, values: [a, b]}
""",
    "kernels/k.yaml": """\
kernels:
  mult:
    description: multiple_of, and its negation in an exclusion
    rules:
      - {id: mult.g, grant: {block: {multiple_of: 16}}, reason: r, source: s, status: untested}
      - {id: mult.x, exclude: {block: {not: {multiple_of: 32}}}, reason: r, source: s, status: untested}
  ranges:
    description: ranges, on two optional axes
    rules:
      - {id: ranges.g, grant: {block: "[16, 64]", page: "<=32"}, reason: r, source: s, status: untested}
      - {id: ranges.x, exclude: {block: ">=48", page: 16}, reason: r, source: s, status: untested}
  negated:
    description: not over values and a range
    rules:
      - {id: negated.g, grant: {block: {not: [8, 16]}}, reason: r, source: s, status: untested}
      - {id: negated.x, exclude: {block: {not: ">=32"}, backend: b}, reason: r, source: s,
         status: untested}
  listed:
    description: listed values, and an enum optional axis
    rules:
      - {id: listed.g, grant: {block: [32, 64], backend: [a, none]}, reason: r, source: s,
         status: untested}
      - {id: listed.x, exclude: {page: ">=64"}, reason: r, source: s, status: untested}
  engine_kernel:
    description: an engine's kernel, asked alone with its engine's default (page none)
    engine: vllm
    rules:
      - {id: engine_kernel.g, grant: {page: {multiple_of: 64}}, reason: r, source: s, status: untested}
      - {id: engine_kernel.x, exclude: {page: {not: "<=32"}, block: ">=64"}, reason: r, source: s,
         status: untested}
models:
  m: {description: m, axes: {page: 16}, source: s}
roles:
  pick_none: {description: r, candidates: [listed, mult, ranges], axes: {block: none}}
  pick_64: {description: r, candidates: [ranges, negated], axes: {block: 64, backend: none}}
  pick_engine: {description: r, candidates: [engine_kernel, mult], axes: {page: 16}}
  pick_vllm: {description: r, candidates: [engine_kernel]}
""",
}


def _cpp_value(axis: str, value: object) -> str:
    if axis == "backend":
        return f"Backend::{_constant(str(value))}"
    return "kNone" if value == "none" else f"INT64_C({value})"


@needs_gxx
def test_optional_axes_answer_like_python(write_matrix: Any, tmp_path: Path) -> None:
    m = capmatrix.load(write_matrix(_OPTIONAL_MATRIX, base=False))
    data = export(m)
    kernels, roles = list(data["kernels"]), list(data["roles"])
    header = cpp_header(data, kernels, roles, command="test")
    assert "constexpr std::int64_t kNone = INT64_MIN;" in header
    (tmp_path / "gen.h").write_text(header, encoding="utf-8")
    unset, open_ = object(), object()
    choices = {
        "block": [unset, open_, "none", 8, 16, 32, 64, 128, *_UNLISTED_BLOCKS, (1 << 63) - 1],
        "page": [unset, open_, "none", 16, 32, 64, 8, 48, 1000],
        "backend": [unset, open_, "none", "a", "b"],
    }
    cases = []
    for combo in itertools.product(*choices.values()):
        given = {a: v for a, v in zip(choices, combo, strict=True) if v is not unset}
        query = {a: (ANY if v is open_ else v) for a, v in given.items()}
        calls = "".join(f".open(AxisId::{_constant(a)})" if v is open_ else f".{a}({_cpp_value(a, v)})"
                        for a, v in given.items())
        cases.append((query, calls))
    lines, expected = [], []
    for query, calls in cases:
        for kernel in kernels:
            lines.append(f"  show(to_string(resolve(Kernel::{_constant(kernel)}, Query(){calls})));")
            expected.append(capmatrix.resolve(KernelQuery(kernel).replace(**query), m).verdict.value)
        for role in roles:
            lines.append(f"  pick(select(Role::{_constant(role)}, Query(){calls}));")
            picked = capmatrix.select(role, KernelQuery().replace(**query), m)
            expected.append(f"{picked.kernel or '-'} {picked.verdict.value}")
    source = [
        '#include "gen.h"', "#include <cstdint>", "#include <iostream>", "using namespace capmatrix;",
        'static void show(const char* v) { std::cout << v << "\\n"; }',
        "static void pick(const Selection& s) {",
        '  std::cout << (s.found ? to_string(s.kernel) : "-") << " " << to_string(s.verdict) << "\\n";',
        "}", "int main() {", *lines, "  return 0;", "}",
    ]
    (tmp_path / "main.cpp").write_text("\n".join(source) + "\n", encoding="utf-8")
    assert GXX is not None
    subprocess.run([GXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O0",
                    str(tmp_path / "main.cpp"), "-o", str(tmp_path / "main")],
                   check=True, capture_output=True, text=True, timeout=600)
    out = subprocess.run([str(tmp_path / "main")], check=True, capture_output=True, text=True,
                         timeout=60).stdout.splitlines()
    assert out == expected
    # The sample reaches every answer, and none is answered unlike the values given.
    assert {"supported", "unsupported", "depends"} <= set(expected)
    per_block: dict[object, set[str]] = {}
    for (query, _calls), i in zip(cases, range(0, len(expected), len(kernels) + len(roles)), strict=True):
        per_block.setdefault(query.get("block", "unset"), set()).add(expected[i])
    assert per_block["none"] != per_block[24]


def test_ints_the_header_cannot_hold_are_refused(data: dict[str, Any]) -> None:
    for bad in (-(1 << 63), 1 << 63):
        axes = {**data["axes"], "beam_width": {**data["axes"]["beam_width"],
                                               "values": [*data["axes"]["beam_width"]["values"], bad]}}
        with pytest.raises(CodegenError, match=f"axis 'beam_width': {bad} does not fit"):
            cpp_header({**data, "axes": axes}, ["xqa"])
    listed = data["axes"]["beam_width"]["values"]
    axes = {**data["axes"], "beam_width": {**data["axes"]["beam_width"], "values": [*listed, "none"]}}
    with pytest.raises(CodegenError, match="axis 'beam_width': expected an int or bool, got 'none'"):
        cpp_header({**data, "axes": axes}, ["xqa"])


# --------------------------------------------------------------------------------------------------
# adversarial matrices: every header either compiles or is refused with a reason

#: Axis names that are the header's own names, C++ keywords or macros (as enum, int or bool axes).
_HOSTILE_ENUM_AXES = ["verdict", "query", "selection", "axis_id", "detail", "std"]
_HOSTILE_INT_AXES = ["linux", "unix", "errno", "set_index", "offsetof", "major"]
_HOSTILE_BOOL_AXES = ["int", "assert", "open", "given_", "va_start", "alloca"]
#: Headers an engine may include before the generated one (their lowercase macros included).
_PRELUDE = """\
#include <alloca.h>
#include <arpa/inet.h>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <sys/sysmacros.h>
#include <sys/types.h>
"""


def _hostile_matrix(kernels: int) -> dict[str, str]:
    axes = ["axes:"]
    for name in _HOSTILE_ENUM_AXES:
        axes += [f"  {name}:", "    type: enum", '    description: "ends in a backslash \\\\"',
                 "    values: [verdict, query, int, linux, '1.5', a+b]"]
    for i, name in enumerate(_HOSTILE_INT_AXES):
        axes += [f"  {name}:", "    type: int", '    description: "also \\\\"', f"    values: [{i}, 90, 120]"]
    for name in _HOSTILE_BOOL_AXES:
        axes += [f"  {name}:", "    type: bool", '    description: "bool \\\\"']
    every = [*_HOSTILE_ENUM_AXES, *_HOSTILE_INT_AXES, *_HOSTILE_BOOL_AXES]
    rules = ["kernels:"]
    for i in range(kernels):
        name = ["int", "linux", "query", "verdict", "assert"][i] if i < 5 else f"k{i}"
        axis = every[i % len(every)]
        value = {"enum": "linux", "int": 90, "bool": "true"}[
            "enum" if axis in _HOSTILE_ENUM_AXES else "int" if axis in _HOSTILE_INT_AXES else "bool"]
        rules += [f"  {name}:", '    description: "kernel \\\\"', "    rules:",
                  (f"      - {{id: {name}.r, grant: {{{axis}: {value}}}, reason: 'r \\\\', source: 's \\\\',"
                  " status: untested}"),
                  (f"      - {{id: {name}.x, exclude: {{linux: 120, int: false}}, reason: x, source: s,"
                  " status: untested}")]
    rules += ["models:", "  m: {description: m, axes: {linux: 90}, source: s}",
              "roles:", "  int: {description: 'r \\\\', candidates: [int, linux, k7]}",
              "  linux: {description: r, candidates: [query], axes: {int: true}}"]
    return {"axes.yaml": "\n".join(axes) + "\n", "kernels/k.yaml": "\n".join(rules) + "\n"}


def test_hostile_names_are_mangled() -> None:
    assert [_method(n) for n in ("linux", "int", "assert", "set_index", "detail", "given_")] == [
        "linux_", "int_", "assert_", "set_index_", "detail_", "given_axis"]
    types = ("verdict", "query", "kernel", "role", "selection", "axis_id", "attention")
    assert [_type(n) for n in types] == [
        "VerdictAxis", "QueryAxis", "KernelAxis", "RoleAxis", "SelectionAxis", "AxisIdAxis", "Attention"]
    assert _comment("ends in \\") == "ends in \\."
    assert _comment("a */ b\n c") == "a * / b c"


@needs_gxx
@pytest.mark.parametrize("kernels", [12, 300])
def test_headers_of_hostile_matrices_compile_and_answer(
    kernels: int, write_matrix: Any, tmp_path: Path
) -> None:
    m = capmatrix.load(write_matrix(_hostile_matrix(kernels), base=False))
    data = export(m)
    names = list(data["kernels"])
    header = cpp_header(data, names, ["int", "linux"], command="test \\")
    (tmp_path / "gen.h").write_text(header, encoding="utf-8")
    checks = [(k, capmatrix.resolve(KernelQuery(k), m).verdict.value) for k in names]
    rigid = KernelQuery("linux", linux=120, int=False, verdict="linux")
    main = [_PRELUDE, '#include "gen.h"', "#include <iostream>", "int main() {",
            "  using namespace capmatrix;", "  Query open;",
            "  Query rigid = Query().linux_(120).int_(false).verdict(VerdictAxis::kLinux);"]
    main += [f'  std::cout << "{k} " << to_string(resolve(Kernel::{_constant(k)}, open)) << "\\n";'
             for k, _v in checks]
    main += ['  std::cout << "rigid " << to_string(resolve(Kernel::kLinux, rigid)) << "\\n";',
             '  std::cout << "select " << to_string(select(Role::kInt, rigid).verdict) << "\\n";',
             "  return 0;", "}"]
    (tmp_path / "main.cpp").write_text("\n".join(main) + "\n", encoding="utf-8")
    assert GXX is not None
    for std in ("-std=c++17", "-std=gnu++17"):
        subprocess.run([GXX, std, "-Wall", "-Wextra", "-Werror", "-pedantic", "-O0",
                        str(tmp_path / "main.cpp"), "-o", str(tmp_path / "main")],
                       check=True, capture_output=True, text=True, timeout=300)
    out = subprocess.run([str(tmp_path / "main")], check=True, capture_output=True, text=True,
                         timeout=60).stdout.splitlines()
    expected = [f"{k} {v}" for k, v in checks]
    expected.append(f"rigid {capmatrix.resolve(rigid, m).verdict.value}")
    picked = capmatrix.select("int", KernelQuery("", linux=120, int=False, verdict="linux"), m)
    expected.append(f"select {picked.verdict.value}")
    assert out == expected
    if kernels > 256:
        assert "enum class Kernel : std::uint16_t {" in header


@pytest.mark.parametrize("namespace", ["int", "std", "linux", "a::class", "detail", "_Cap", "a__b"])
def test_a_namespace_that_is_a_keyword_or_macro_is_refused(namespace: str, data: dict[str, Any]) -> None:
    with pytest.raises(CodegenError, match=f"namespace '{namespace}'"):
        cpp_header(data, ["xqa"], namespace=namespace)


@pytest.mark.parametrize("namespace", ["int", "a::class"])
def test_the_cli_refuses_such_a_namespace(namespace: str) -> None:
    """The command line exits 2 with the refusal (a keyword and a malformed path: one check, which
    exports the whole matrix first)."""
    out, err = io.StringIO(), io.StringIO()
    assert run(["codegen", "cpp", "--kernel", "xqa", "--namespace", namespace], out, err) == 2
    assert out.getvalue() == ""
    assert err.getvalue().startswith(f"capmatrix: error: namespace '{namespace}'")


def test_enum_axes_whose_types_collide_are_refused(write_matrix: Any) -> None:
    files = {"axes.yaml": (
        "axes:\n"
        "  verdict: {type: enum, description: d, values: [a, b]}\n"
        "  verdict_axis: {type: enum, description: d, values: [a, b]}\n"
    ), "kernels/k.yaml": (
        "kernels:\n  k:\n    description: d\n    rules:\n"
        "      - {id: k.r, grant: {verdict: a, verdict_axis: b}, reason: r, source: s, status: untested}\n"
        "models:\n  m: {description: m, axes: {verdict: a}, source: s}\n"
        "roles:\n  r: {description: r, candidates: [k]}\n"
    )}
    data = export(capmatrix.load(write_matrix(files, base=False)))
    with pytest.raises(CodegenError, match="'verdict_axis' and 'verdict' both become 'VerdictAxis'"):
        cpp_header(data, ["k"])


def test_more_kernels_than_the_enum_holds_are_refused(
    data: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("capmatrix.authoring.codegen.cpp.MAX_KERNELS", 2)
    with pytest.raises(CodegenError, match="3 kernels, 0 roles; a header holds at most 2 of each"):
        cpp_header(data, list(data["kernels"])[:3])


# ---- engine-start checks: start_check() and Selection::start ------------------------------------------


def _compile_and_run(header: str, lines: list[str], tmp_path: Path, *, roles: bool) -> list[str]:
    """``lines`` of C++ in main(), against ``header`` (with ``roles``: its Selection); the output lines."""
    selection = [
        "static void pick(const Selection& s) {",
        '  std::cout << (s.found ? to_string(s.kernel) : "-") << " " << to_string(s.verdict) << " "',
        '            << (s.start.refused ? to_string(s.start.gate) : "-") << "\\n";',
        "}",
    ]
    (tmp_path / "gen.h").write_text(header, encoding="utf-8")
    source = [
        '#include "gen.h"', "#include <iostream>", "using namespace capmatrix;",
        "[[maybe_unused]] static void check(Verdict own, const StartCheck& c) {",
        '  std::cout << to_string(own) << " " << (c.refused ? to_string(c.gate) : "-") << " "',
        '            << to_string(c.verdict) << "\\n";',
        "}", *(selection if roles else []), "int main() {", *lines, "  return 0;", "}",
    ]
    (tmp_path / "main.cpp").write_text("\n".join(source) + "\n", encoding="utf-8")
    assert GXX is not None
    subprocess.run([GXX, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O0",
                    str(tmp_path / "main.cpp"), "-o", str(tmp_path / "main")],
                   check=True, capture_output=True, text=True, timeout=600)
    return subprocess.run([str(tmp_path / "main")], check=True, capture_output=True, text=True,
                          timeout=60).stdout.splitlines()


def _setter(data: dict[str, Any], axis: str, value: object) -> str:
    if value is ANY:
        return f".open(AxisId::{_constant(axis)})"
    if data["axes"][axis]["type"] == "enum":
        return f".{_method(axis)}({_type(axis)}::{_constant(str(value))})"
    return f".{_method(axis)}({'kNone' if value == 'none' else int(value)})"  # type: ignore[call-overload]


def _start_answer(matrix: capmatrix.Matrix, kernel: str, query: KernelQuery) -> str:
    """Python's: the kernel's verdict, then its first start check that does not admit (or -)."""
    resolution = capmatrix.resolve(query, matrix)
    refusal = refused_at_start(compile_matrix(matrix), kernel, resolution.query)
    stop = "- supported" if refusal is None else f"{refusal.kernel} {refusal.verdict}"
    return f"{resolution.verdict} {stop}"


@needs_gxx
def test_start_check_answers_like_python(
    matrix: capmatrix.Matrix, data: dict[str, Any], tmp_path: Path
) -> None:
    """vLLM's TRITON_ATTN and TRITON_MLA: their init gates join the header; FP8 below SM89 is refused."""
    kernels = ["vllm_triton_attn", "vllm_triton_mla"]
    header = cpp_header(data, kernels, command="test")
    assert "Kernel::kVllmTritonAttnInit" in header  # named by start_checks alone
    shapes = {"vllm_triton_attn": {"attention": "gqa", "head_dim": 128},
              "vllm_triton_mla": {"attention": "mla", "head_dim": 576}}
    lines, expected = [], []
    for kernel, sm, kv, dtype in itertools.product(
        kernels, data["axes"]["sm"]["values"], [*data["axes"]["kv_cache_dtype"]["values"], ANY],
        ["fp16", "bf16"],
    ):
        values: dict[str, object] = {**shapes[kernel], "sm": sm, "kv_cache_dtype": kv, "dtype": dtype}
        calls = "".join(_setter(data, a, v) for a, v in values.items())
        lines.append(f"  check(resolve(Kernel::{_constant(kernel)}, Query(){calls}), "
                     f"start_check(Kernel::{_constant(kernel)}, Query(){calls}));")
        expected.append(_start_answer(matrix, kernel, KernelQuery(kernel).replace(**values)))
    got = _compile_and_run(header, lines, tmp_path, roles=False)
    assert got == expected
    assert "supported vllm_triton_attn_init unsupported" in got  # picked, then refused at start
    assert "supported vllm_triton_mla_init unsupported" in got
    assert "supported - supported" in got  # SM89 and up, or a 16-bit cache
    assert any(line.endswith("_init depends") for line in got)  # the cache dtype left open


_START_MATRIX = {
    "axes.yaml": """\
axes:
  sm: {type: int, description: an SM, values: [75, 80, 89, 90]}
  kv: {type: enum, description: a cache dtype, values: [auto, fp8]}
  page:
    type: int
    optional: true
    default: 32
    description: a page size
    values: [16, 32]
    engine_defaults: {vllm: 16}
""",
    "kernels/k.yaml": """\
kernels:
  target:
    description: what the engine's choice sends queries to
    rules:
      - {id: target.g, grant: {sm: ">=75"}, reason: r, source: s, status: untested}
  picked:
    kind: gate
    description: the engine's choice, asked again at start
    guards:
      targets: [target]
      caught_by: [init]
    rules:
      - {id: picked.g, grant: {sm: ">=75"}, reason: r, source: s, status: untested}
  init:
    kind: gate
    engine: vllm
    description: the check at start (its engine's page default is 16)
    rules:
      - {id: init.g, grant: {kv: [auto, fp8]}, reason: r, source: s, status: untested}
      - {id: init.fp8, exclude: {kv: fp8, sm: "<89"}, reason: r, source: s, status: untested}
      - {id: init.page, exclude: {page: 16, sm: 75}, reason: r, source: s, status: untested}
  fallback:
    description: the next candidate
    rules:
      - {id: fallback.g, grant: {sm: ">=75"}, reason: r, source: s, status: untested}
roles:
  pick: {description: r, candidates: [picked, fallback]}
  pick_page: {description: the role's page over the check's default, candidates: [picked, fallback],
              axes: {page: 32}}
""",
}


@needs_gxx
def test_selection_carries_the_winners_start_check(write_matrix: Any, tmp_path: Path) -> None:
    """select() asks its winner's checks with the role's axes (over the check's engine defaults)."""
    m = capmatrix.load(write_matrix(_START_MATRIX, base=False))
    data = export(m)
    assert data["kernels"]["picked"]["start_checks"] == ["init"]
    header = cpp_header(data, [], ["pick", "pick_page"], command="test")
    resolver = compile_matrix(m)
    lines, expected = [], []
    for role, sm, kv, page in itertools.product(["pick", "pick_page"], [75, 80, 89, 90], ["auto", "fp8", ANY],
                                                [None, 16, 32, "none"]):
        values: dict[str, object] = {"sm": sm, "kv": kv}
        if page is not None:
            values["page"] = page
        calls = "".join(_setter(data, a, v) for a, v in values.items())
        lines.append(f"  pick(select(Role::{_constant(role)}, Query(){calls}));")
        selection = capmatrix.select(role, KernelQuery().replace(**values), m)
        refusal = None if selection.resolution is None else refused_at_start(
            resolver, selection.resolution.kernel, selection.resolution.query)
        stop = "-" if refusal is None else refusal.kernel
        expected.append(f"{selection.kernel or '-'} {selection.verdict} {stop}")
    got = _compile_and_run(header, lines, tmp_path, roles=True)
    assert got == expected
    assert "picked supported init" in got
    # sm 75, auto, page unset: the check's own default (16) refuses for pick; pick_page's 32 wins over it.
    first = {role: got[i] for i, role in ((0, "pick"), (len(got) // 2, "pick_page"))}
    assert first == {"pick": "picked supported init", "pick_page": "picked supported -"}

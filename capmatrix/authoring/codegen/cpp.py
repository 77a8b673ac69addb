"""A self-contained C++17 header that answers chosen kernels, gates and roles from generated tables.

The header is generated from the exported artifact (:func:`capmatrix.authoring.export.export`) and needs only
``<cstddef>`` and ``<cstdint>``. It holds, per axis the chosen kernels' rules name, an enum (enum
axes) or a value table (int and bool axes); per rule, one bit mask per axis over the axis's universe,
plus the condition for int values outside the universe; per kernel, its rule range; per role, its
candidates in order and its pinned axes. Its answers follow docs/export.md, as ``resolve`` and
``select`` do:

- ``capmatrix::Query`` starts with every axis at its default, and the axes without one open;
  setters (``.sm(120)``, ``.attention(Attention::kGqa)``) fix values and ``.open(AxisId::kX)``
  opens one again;
- an optional axis's ``none`` ("not given, not checked") is a value of its universe like any other:
  ``SomeAxis::kNone`` on an enum axis, ``capmatrix::kNone`` (``INT64_MIN``, which no int of the
  matrix may be) on an int axis (``.tokens_per_block(kNone)``);
- ``resolve(Kernel, Query)`` gives ``Verdict::kSupported``, ``kUnsupported``, or ``kDepends`` when
  the answer changes over the open axes the kernel's rules name (it then walks every combination of
  their universes: engines on a hot path should give complete queries); the kernel's engine defaults
  (the artifact's kernel ``axes``: vLLM's ``tokens_per_block: none``) apply where the query did not
  set the axis;
- ``select(Role, Query)`` tries the candidates in order (the role's axes apply where the query
  did not set them) and returns the first supported one, with ``kDepends`` as the verdict when an
  earlier candidate depended on an open axis; a role with orders takes the first order whose
  ``when`` holds (undecided, ``kDepends``, when one reads an open axis first);
- ``start_check(Kernel, Query)`` asks a kernel's engine-start checks (the artifact's ``start_checks``,
  docs/export.md step 6: gates the engine asks once it chose the kernel, vLLM's
  ``TritonAttentionImpl.__init__``) and returns the first that does not admit the query
  (``refused``, ``gate``, ``verdict``); ``select`` fills ``Selection::start`` for its winner the same
  way, with the role's axes. The checks' gates join the header's kernels.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from capmatrix.authoring.codegen import _cpp_runtime
from capmatrix.authoring.export import FORMAT, FORMAT_VERSION
from capmatrix.errors import CapmatrixError
from capmatrix.model import NONE as _NONE_VALUE

__all__ = ["CodegenError", "cpp_header"]

#: Bit masks are 64-bit: an axis may have at most this many values, a header at most this many axes.
MAX_VALUES = 64
MAX_AXES = 64
#: Kernels (and roles) a header may answer: their enums are 16-bit at most.
MAX_KERNELS = 65536

#: C++ keywords, and the names of Query's own members: an axis setter must be neither.
_KEYWORDS = frozenset([
    "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
    "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
    "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
    "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
    "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto", "if",
    "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq", "nullptr",
    "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
    "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast",
    "struct", "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef",
    "typeid", "typename", "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t",
    "while", "xor", "xor_eq", "open", "resolve", "select", "start_check", "value", "given",
    # Query's other members, and the names its bodies qualify
    "set_index", "set_int", "detail", "std",
    # lowercase macros: predefined in GNU modes (-std=gnu++17) on common targets, or defined by the
    # C and POSIX headers an engine may include before this one (a function-like one expands too)
    "linux", "unix", "i386", "sun", "sparc", "mips", "vax", "assert", "errno", "offsetof",
    "setjmp", "va_arg", "va_copy", "va_end", "va_start", "stdin", "stdout", "stderr", "major",
    "minor", "makedev", "alloca", "htonl", "htons", "ntohl", "ntohs", "getc", "putc", "getchar",
    "putchar", "signbit", "fpclassify", "isfinite", "isinf", "isnan", "isnormal",
])
#: Query's data members: a setter mangled with a trailing underscore must not become one.
_MEMBERS = frozenset(["index_", "value_", "given_"])
#: Names the header declares in its namespace: an enum axis's type must be none of them.
_OWN_TYPES = frozenset(["Verdict", "AxisId", "Kernel", "Role", "Query", "Selection", "StartCheck"])


class CodegenError(CapmatrixError):
    """The header cannot be generated (an unknown kernel or role, an axis too large for the tables)."""


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[^A-Za-z0-9]+", name) if w]


def _camel(name: str) -> str:
    text = "".join(w[:1].upper() + w[1:] for w in _words(name))
    return text if text and not text[0].isdigit() else f"X{text}"


def _constant(name: str) -> str:
    """``first_chain_draft`` -> ``kFirstChainDraft``."""
    return f"k{_camel(name)}"


def _method(name: str) -> str:
    """An axis name as a setter: valid, and never a keyword or a member of ``Query``."""
    text = "_".join(_words(name)).lower() or "axis"
    if text[0].isdigit():
        text = f"axis_{text}"
    if text not in _KEYWORDS:
        return text
    return f"{text}_axis" if f"{text}_" in _MEMBERS else f"{text}_"


def _cstr(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _comment(text: str) -> str:
    """``text`` on one comment line: never closing a block comment, never continued by a final backslash."""
    out = " ".join(text.replace("*/", "* /").split())
    return f"{out}." if out.endswith("\\") else out


def _type(axis: str) -> str:
    """An enum axis's type name: ``kv_cache_dtype`` -> ``KvCacheDtype``, never one of the header's own."""
    name = _camel(axis)
    return f"{name}Axis" if name in _OWN_TYPES else name


def _width(count: int) -> str:
    """The unsigned type of an enum of ``count`` members."""
    return "std::uint8_t" if count <= 1 << 8 else "std::uint16_t"


def _unique(names: dict[str, str], what: str) -> None:
    seen: dict[str, str] = {}
    for original, made in names.items():
        if made in seen:
            raise CodegenError(f"{what} {original!r} and {seen[made]!r} both become {made!r} in C++")
        seen[made] = original


#: The C++ spelling of "not given" on an optional int axis: the header's ``kNone`` is ``INT64_MIN``, so
#: an int the header holds lies above it.
_NONE = "kNone"
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def _int(value: object, axis: str, *, optional: bool) -> str:
    """An int or bool axis value as a C++ ``std::int64_t`` literal: bool 0/1, ``none`` as ``kNone``.

    ``none`` is a value only of an optional axis; every other int must fit ``std::int64_t`` above
    ``INT64_MIN``, which the header reserves for ``kNone``.
    """
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        if not _INT64_MIN < value <= _INT64_MAX:
            raise CodegenError(
                f"axis {axis!r}: {value} does not fit the header's std::int64_t above INT64_MIN "
                "(INT64_MIN is kNone, 'not given'); keep the matrix's ints within "
                f"[{_INT64_MIN + 1}, {_INT64_MAX}]"
            )
        return str(value)
    if optional and value == _NONE_VALUE:
        return _NONE
    msg = f"axis {axis!r}: expected an int or bool, got {value!r}"
    raise CodegenError(msg)


class _Header:
    def __init__(self, data: dict[str, Any], kernels: list[str], roles: list[str], namespace: str,
                 command: str) -> None:
        if data.get("format") != FORMAT or str(data.get("format_version", "")).split(".")[0] != "1":
            raise CodegenError(f"not a {FORMAT} artifact of format version 1")
        self.data = data
        self.command = command
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*", namespace):
            raise CodegenError(f"{namespace!r} is not a C++ namespace name")
        for part in namespace.split("::"):
            if part in _KEYWORDS or part.startswith("_") or "__" in part:
                raise CodegenError(
                    f"namespace {namespace!r}: {part!r} is a C++ keyword, a macro, a name the header "
                    "uses or a reserved identifier; choose another --namespace"
                )
        self.namespace = namespace
        for role in roles:
            if role not in data["roles"]:
                raise CodegenError(f"unknown role {role!r}; known: {', '.join(data['roles'])}")
            for order in data["roles"][role].get("orders", ()):
                for box in order["when"]:
                    for axis in box:
                        # A derived axis (computed from others) in an order's 'when' has no table in
                        # the header: refused rather than answered wrongly. An optional axis's 'none'
                        # is a universe value, which the order's masks answer as a rule's do.
                        if axis not in data["axes"]:
                            raise CodegenError(
                                f"role {role!r}: an order reads {axis!r}, a derived axis, which the C++ "
                                "header does not express in orders; name its kernels with --kernel instead"
                            )
        chosen = list(dict.fromkeys(kernels))
        for role in roles:
            chosen.extend(c for c in data["roles"][role]["candidates"] if c not in chosen)
        for kernel in chosen:  # grows as it goes: a check's own checks join too
            if kernel not in data["kernels"]:
                raise CodegenError(f"unknown kernel {kernel!r}; known: {', '.join(data['kernels'])}")
            # The gates the engine asks at start once it chose the kernel (start_check answers them).
            chosen.extend(g for g in data["kernels"][kernel].get("start_checks", ()) if g not in chosen)
            for rule in data["kernels"][kernel]["rules"]:
                # A class condition (a rule on a derived axis, expanded) answers an int no list names
                # by its signature over the axis's cuts, which the tables do not hold: refused rather
                # than answered from its listed values alone.
                classed = [a for a, c in rule["conditions"].items() if "signatures" in c]
                if classed:
                    raise CodegenError(
                        f"kernel {kernel!r}: rule {rule['id']!r} has a class condition on {classed[0]!r} "
                        "(from a derived axis), which the C++ header does not express yet; choose "
                        "other kernels"
                    )
        if not chosen:
            raise CodegenError("name at least one kernel or role")
        if len(chosen) > MAX_KERNELS or len(roles) > MAX_KERNELS:
            raise CodegenError(f"{len(chosen)} kernels, {len(roles)} roles; a header holds at most "
                               f"{MAX_KERNELS} of each")
        self.kernels = chosen
        self.roles = roles
        named = {a for k in chosen for a in data["kernels"][k]["relevant_axes"]}
        named.update(a for r in roles for order in data["roles"][r].get("orders", ())
                     for box in order["when"] for a in box)
        self.axes = [a for a in data["axes"] if a in named]
        if len(self.axes) > MAX_AXES:
            raise CodegenError(f"{len(self.axes)} axes; the tables hold at most {MAX_AXES}")
        for axis in self.axes:
            spec = data["axes"][axis]
            if spec.get("optional") and _NONE_VALUE not in spec["values"]:
                # An optional axis's 'none' is a universe value: the masks answer it (docs/export.md).
                raise CodegenError(f"optional axis {axis!r} has no {_NONE_VALUE!r} among its values")
            if len(data["axes"][axis]["values"]) > MAX_VALUES:
                raise CodegenError(
                    f"axis {axis!r} has {len(data['axes'][axis]['values'])} values; "
                    f"the tables hold at most {MAX_VALUES}"
                )
        self.pos = {a: i for i, a in enumerate(self.axes)}
        _unique({a: _method(a) for a in self.axes}, "axis")
        _unique({a: _type(a) for a in self.axes if data["axes"][a]["type"] == "enum"}, "enum axis")
        _unique({k: _constant(k) for k in chosen}, "kernel")
        _unique({r: _constant(r) for r in roles}, "role")
        for axis in self.axes:
            spec = data["axes"][axis]
            if spec["type"] == "enum":
                _unique({str(v): _constant(str(v)) for v in spec["values"]}, f"value of {axis}")
        self.out: list[str] = []

    # -- helpers -------------------------------------------------------------------------------

    def emit(self, *lines: str) -> None:
        self.out.extend(lines)

    def spec(self, axis: str) -> dict[str, Any]:
        return self.data["axes"][axis]  # type: ignore[no-any-return]

    def optional(self, axis: str) -> bool:
        return bool(self.spec(axis).get("optional"))

    def literal(self, axis: str, value: object) -> str:
        """``value`` of ``axis`` as the header's ``std::int64_t`` (an enum value: 0, unused)."""
        if self.spec(axis)["type"] == "enum":
            return "0"
        return _int(value, axis, optional=self.optional(axis))

    def pins(self, axes: dict[str, object]) -> list[str]:
        """A kernel's or role's ``axes`` as ``Pin`` rows (axes no rule of the header names change nothing)."""
        return [
            f"{{{self.pos[axis]}, {self.index_of(axis, raw)}, {self.literal(axis, raw)}}}"
            for axis, raw in axes.items()
            if axis in self.pos
        ]

    def index_of(self, axis: str, value: object) -> int:
        for i, known in enumerate(self.spec(axis)["values"]):
            if known == value and type(known) is type(value):
                return i
        return -1

    # -- sections ------------------------------------------------------------------------------

    def banner(self) -> None:
        guard = "_".join(w.upper() for w in _words(self.namespace)) + "_CAPMATRIX_GENERATED_H_"
        self.guard = guard
        self.emit(
            f"// Generated by `{_comment(self.command)}` from the capmatrix matrix",
            f"// ({FORMAT} {FORMAT_VERSION}); do not edit. Regenerate it when the matrix changes.",
            "//",
            "// Kernels and gates: " + ", ".join(self.kernels) + ".",
            "// Roles: " + (", ".join(self.roles) if self.roles else "none") + ".",
            "// Axes (the ones these kernels' rules name; no other axis changes an answer): "
            + ", ".join(self.axes) + ".",
            "//",
            "// Semantics (docs/export.md): a Query starts with every axis at its default and the axes",
            "// without one open. resolve() answers kSupported when a grant applies and no exclusion does,",
            "// for every combination of the open axes the kernel's rules name; kUnsupported when for",
            "// none; kDepends otherwise (it walks those combinations: give complete queries on a hot",
            "// path); the kernel's engine defaults apply where the query did not set the axis. select()",
            "// tries a role's candidates in order with the role's axes (over its engine's defaults)",
            "// applied where the query did not set them; the first supported candidate wins. An optional",
            "// axis's none (not given, not checked) is a value like any other: kNone on an int axis.",
            "// start_check() asks a chosen kernel's engine-start checks (gates the engine asks once it",
            "// chose the kernel); select() asks them of its winner into Selection::start.",
            f"#ifndef {guard}",
            f"#define {guard}",
            "",
            "#include <cstddef>",
            "#include <cstdint>",
            "",
            f"namespace {self.namespace} {{",
            "",
            "enum class Verdict : std::uint8_t { kUnsupported = 0, kSupported = 1, kDepends = 2 };",
            "",
            "inline const char* to_string(Verdict v) noexcept {",
            "  switch (v) {",
            '    case Verdict::kSupported: return "supported";',
            '    case Verdict::kUnsupported: return "unsupported";',
            '    case Verdict::kDepends: return "depends";',
            "  }",
            '  return "?";',
            "}",
            "",
            "/// \"Not given\" on an optional int axis (the matrix's `none`, e.g. vLLM's unset block size):",
            "/// pass it to the axis's setter. As in the matrix it is not checked: a grant's condition on",
            "/// the axis holds for it and an exclusion's does not apply. Every int of the matrix lies",
            "/// above it; on an axis that is not optional it is the int INT64_MIN.",
            f"constexpr std::int64_t {_NONE} = INT64_MIN;",
            "",
        )

    def axis_types(self) -> None:
        self.emit("/// The axes of this header, in the matrix's order.",
                  "enum class AxisId : std::uint8_t {")
        self.emit(*(f"  {_constant(a)} = {i}," for i, a in enumerate(self.axes)))
        self.emit("};", f"constexpr std::size_t kAxisCount = {len(self.axes)};", "")
        for axis in self.axes:
            spec = self.spec(axis)
            if spec["type"] != "enum":
                continue
            self.emit(f"/// {axis}: {_comment(spec['description'])}",
                      f"enum class {_type(axis)} : std::uint8_t {{")
            self.emit(*(f"  {_constant(str(v))} = {i}," for i, v in enumerate(spec["values"])))
            self.emit("};", "")
        self.emit(f"enum class Kernel : {_width(len(self.kernels))} {{")
        for i, kernel in enumerate(self.kernels):
            kind = self.data["kernels"][kernel]["kind"]
            self.emit(f"  {_constant(kernel)} = {i},  // {kind} {kernel}")
        self.emit("};", f"constexpr std::size_t kKernelCount = {len(self.kernels)};", "")
        self.emit("inline const char* to_string(Kernel k) noexcept {", "  switch (k) {")
        self.emit(*(f"    case Kernel::{_constant(k)}: return {_cstr(k)};" for k in self.kernels))
        self.emit("  }", '  return "?";', "}", "")
        if self.roles:
            self.emit(f"enum class Role : {_width(len(self.roles))} {{")
            self.emit(*(f"  {_constant(r)} = {i}," for i, r in enumerate(self.roles)))
            self.emit("};", "")

    def tables(self) -> None:
        values: list[str] = []
        moduli: list[str] = []
        intervals: list[str] = []
        conditions: list[str] = []
        rules: list[str] = []
        kernel_rows: list[str] = []
        pins: list[str] = []  # the kernels' (their engine's defaults), then the roles'
        checks: list[str] = []  # per kernel, its start checks (gates of the header)
        def box_row(box: dict[str, list[Any]], by_axis: dict[str, Any]) -> str:
            """A box as a ``Rule`` row's named bits, masks and condition references."""
            masks, conds = [], []
            named = 0
            for axis in self.axes:
                size = len(self.spec(axis)["values"])
                if axis not in box:
                    masks.append(f"0x{(1 << size) - 1:x}ull")
                    conds.append("-1")
                    continue
                named |= 1 << self.pos[axis]
                mask = 0
                for value in box[axis]:
                    mask |= 1 << self.index_of(axis, value)
                masks.append(f"0x{mask:x}ull")
                if self.spec(axis)["type"] == "enum":
                    conds.append("-1")  # an enum query is always a value of the universe
                    continue
                cond = by_axis[axis]
                v0 = len(values)
                # The conditions are asked only of ints no list names. 'none' is a universe value
                # of an optional axis, answered by the mask (its bit is the condition's
                # admits_none), so it never reaches them and no condition lists it.
                values.extend(self.literal(axis, v) for v in cond["values"] if v != _NONE_VALUE)
                i0 = len(intervals)
                for item in cond["intervals"]:
                    low, high = "low" in item, "high" in item
                    intervals.append(
                        f"{{{str(low).lower()}, {_int(item.get('low', 0), axis, optional=False)}, "
                        f"{str(item.get('low_inclusive', False)).lower()}, {str(high).lower()}, "
                        f"{_int(item.get('high', 0), axis, optional=False)}, "
                        f"{str(item.get('high_inclusive', False)).lower()}}}"
                    )
                m0 = len(moduli)
                moduli.extend(_int(m, axis, optional=False) for m in cond.get("multiple_of", ()))
                conds.append(str(len(conditions)))
                conditions.append(
                    f"{{{v0}, {len(values)}, {i0}, {len(intervals)}, {m0}, {len(moduli)}, "
                    f"{str(cond['negated']).lower()}}}"
                )
            return f"0x{named:x}ull, {{{', '.join(masks)}}}, {{{', '.join(conds)}}}"

        for kernel in self.kernels:
            entry = self.data["kernels"][kernel]
            begin = len(rules)
            p0 = len(pins)
            pins.extend(self.pins(entry.get("axes", {})))
            relevant = 0
            for axis in entry["relevant_axes"]:
                relevant |= 1 << self.pos[axis]

            for rule in entry["rules"]:
                grant = "true" if rule["effect"] == "grant" else "false"
                rules.append(
                    f"  // {_comment(rule['id'])} ({rule['effect']}, {rule['status']}; "
                    f"{_comment(rule['location']['file'])}:{rule['location'].get('line', '?')})\n"
                    f"  {{{grant}, {box_row(rule['box'], rule['conditions'])}}},"
                )
            c0 = len(checks)
            checks.extend(f"Kernel::{_constant(g)}" for g in entry.get("start_checks", ()))
            kernel_rows.append(
                f"  {{{begin}, {len(rules)}, 0x{relevant:x}ull, {p0}, {len(pins)}, {c0}, {len(checks)}}},"
                f"  // {kernel}"
            )
        sizes = ", ".join(str(len(self.spec(a)["values"])) for a in self.axes)
        int_begin: list[str] = []
        int_values: list[str] = []
        for axis in self.axes:
            int_begin.append(str(len(int_values)))
            if self.spec(axis)["type"] != "enum":  # an optional axis's 'none' is kNone, in its place
                int_values.extend(self.literal(axis, v) for v in self.spec(axis)["values"])
        int_begin.append(str(len(int_values)))
        defaults = []
        for axis in self.axes:
            spec = self.spec(axis)
            if "default" in spec:
                raw = spec["default"]
                defaults.append(f"{{{self.index_of(axis, raw)}, {self.literal(axis, raw)}}}")
            else:
                defaults.append("{kOpen, 0}")
        role_rows = len(pins) + sum(
            len(self.data["roles"][r]["candidates"]) + len(self.data["roles"][r]["axes"])
            + sum(len(o["candidates"]) + len(o["when"]) for o in self.data["roles"][r].get("orders", ()))
            for r in self.roles
        )
        longest = max(len(values), len(intervals), len(conditions), len(rules), len(moduli),
                      len(int_values), role_rows, len(checks))
        index = "std::uint16_t" if longest < 1 << 16 else "std::uint32_t"
        cond_ref = "std::int16_t" if len(conditions) < 1 << 15 else "std::int32_t"
        self.emit(
            "namespace detail {",
            "",
            "/// A position in the tables below, and a rule's reference to a condition (-1: none).",
            f"using Index = {index};",
            f"using CondRef = {cond_ref};",
            "",
            "/// An index that means: the axis ranges over its universe.",
            "constexpr std::int16_t kOpen = -2;",
            "/// An index that means: an int value outside the universe (answered by the conditions; an",
            "/// optional axis's kNone is in its universe, so the masks answer it and no condition sees it).",
            "constexpr std::int16_t kOutside = -1;",
            "",
            "struct Interval {",
            "  bool has_low; std::int64_t low; bool low_inclusive;",
            "  bool has_high; std::int64_t high; bool high_inclusive;",
            "};",
            "struct Condition {",
            "  Index values_begin, values_end, intervals_begin, intervals_end;",
            "  Index moduli_begin, moduli_end;  // multiple_of: divisible by one of these",
            "  bool negated;",
            "};",
            "struct Rule {",
            "  bool grant;",
            "  std::uint64_t named;                     // bit per axis the rule names",
            "  std::uint64_t mask[kAxisCount];          // per axis: bit per universe value admitted",
            "  CondRef condition[kAxisCount];           // per named axis: its Condition (outside values)",
            "};",
            "/// A value a kernel (its engine's default) or a role is asked with where the query sets none.",
            "struct Pin { std::uint8_t axis; std::int16_t index; std::int64_t value; };",
            "/// A kernel's rules [begin, end), pins and engine-start checks (kStartChecks) [begin, end).",
            "struct KernelRules {",
            "  Index begin, end;",
            "  std::uint64_t relevant;",
            "  Index pins_begin, pins_end, checks_begin, checks_end;",
            "};",
            "struct Default { std::int16_t index; std::int64_t value; };",
            "",
            f"constexpr std::uint8_t kAxisSize[kAxisCount] = {{{sizes}}};",
            "/// The universes of the int and bool axes (bool: 0/1), per axis from kIntBegin[a].",
            f"constexpr std::int64_t kIntValues[] = {{{', '.join(int_values) or '0'}}};",
            f"constexpr Index kIntBegin[kAxisCount + 1] = {{{', '.join(int_begin)}}};",
            f"constexpr Default kDefaults[kAxisCount] = {{{', '.join(defaults)}}};",
            f"constexpr std::int64_t kCondValues[] = {{{', '.join(values) or '0'}}};",
            f"constexpr std::int64_t kCondModuli[] = {{{', '.join(moduli) or '1'}}};",
            "constexpr Interval kIntervals[] = {",
            *(f"  {i}," for i in intervals or ["{false, 0, false, false, 0, false}"]),
            "};",
            "constexpr Condition kConditions[] = {",
            *(f"  {c}," for c in conditions or ["{0, 0, 0, 0, 0, 0, false}"]),
            "};",
            "constexpr Rule kRules[] = {",
            *rules,
            "};",
            "/// The gates the engine asks at start once it chose a kernel (its guard's caught_by).",
            f"constexpr Kernel kStartChecks[] = {{{', '.join(checks) or 'Kernel{}'}}};",
            "constexpr KernelRules kKernels[kKernelCount] = {",
            *kernel_rows,
            "};",
        )
        if self.roles:
            cand_rows: list[str] = []
            cands: list[str] = []
            order_rows: list[str] = []
            order_boxes: list[str] = []
            for role in self.roles:
                entry = self.data["roles"][role]
                c0 = len(cands)
                cands.extend(f"Kernel::{_constant(c)}" for c in entry["candidates"])
                c1 = len(cands)
                p0 = len(pins)
                pins.extend(self.pins(entry["axes"]))
                o0 = len(order_rows)
                for order in entry.get("orders", ()):
                    b0, k0 = len(order_boxes), len(cands)
                    rows = (box_row({a: c["values"] for a, c in box.items()},
                                    {a: c["condition"] for a, c in box.items()}) for box in order["when"])
                    order_boxes.extend(f"  {{true, {row}}}," for row in rows)
                    cands.extend(f"Kernel::{_constant(c)}" for c in order["candidates"])
                    order_rows.append(f"  {{{b0}, {len(order_boxes)}, {k0}, {len(cands)}}},  // {role}")
                cand_rows.append(
                    f"  {{{c0}, {c1}, {p0}, {len(pins)}, {o0}, {len(order_rows)}}},  // {role}")
            self.emit(
                "/// A role's candidates (its orders' lists after them), pins and orders [begin, end).",
                "struct RoleRow {",
                "  Index candidates_begin, candidates_end, pins_begin, pins_end, orders_begin, orders_end;",
                "};",
                "/// One order of a role: its 'when' (a union of boxes; none: every query) and candidates.",
                "struct Order { Index boxes_begin, boxes_end, candidates_begin, candidates_end; };",
                f"constexpr Kernel kCandidates[] = {{{', '.join(cands)}}};",
                "constexpr Rule kOrderBoxes[] = {",
                *(order_boxes or ["  {true, 0, {}, {}},"]),
                "};",
                "constexpr Order kOrders[] = {",
                *(order_rows or ["  {0, 0, 0, 0},"]),
                "};",
                "constexpr RoleRow kRoles[] = {",
                *cand_rows,
                "};",
            )
        self.emit(f"constexpr Pin kPins[] = {{{', '.join(pins) or '{0, 0, 0}'}}};",
                  "", "}  // namespace detail", "")

    def query(self) -> None:
        self.emit(
            "/// The values of one question. Axes start at their default, or open when they have none.",
            "class Query {",
            " public:",
            "  Query() noexcept {",
            "    for (std::size_t a = 0; a < kAxisCount; ++a) {",
            "      index_[a] = detail::kDefaults[a].index;",
            "      value_[a] = detail::kDefaults[a].value;",
            "      given_[a] = false;",
            "    }",
            "  }",
        )
        for axis in self.axes:
            spec = self.spec(axis)
            ident = _constant(axis)
            shown = ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in spec["values"])
            none = f"; {_NONE}: not given" if spec["type"] == "int" and self.optional(axis) else ""
            self.emit(f"  /// {axis} ({spec['type']}: {_comment(shown)}{none})")
            if spec["type"] == "enum":
                self.emit(
                    f"  Query& {_method(axis)}({_type(axis)} v) noexcept {{",
                    f"    return set_index(AxisId::{ident}, static_cast<std::int16_t>(v), 0);",
                    "  }",
                )
            elif spec["type"] == "bool":
                self.emit(
                    f"  Query& {_method(axis)}(bool v) noexcept {{ return set_int(AxisId::{ident}, v); }}"
                )
            else:
                self.emit(
                    f"  Query& {_method(axis)}(std::int64_t v) noexcept "
                    f"{{ return set_int(AxisId::{ident}, v); }}"
                )
        self.emit(
            "  /// Let an axis range over its universe (the answer may then be kDepends).",
            "  Query& open(AxisId a) noexcept { return set_index(a, detail::kOpen, 0); }",
            "  /// Whether the caller set the axis (a role's axes apply only where it did not).",
            "  bool given(AxisId a) const noexcept { return given_[static_cast<std::size_t>(a)]; }",
            "",
            "  // Read by resolve() and select(): universe index (or kOpen / kOutside) and value.",
            "  std::int16_t index_[kAxisCount];",
            "  std::int64_t value_[kAxisCount];",
            "  bool given_[kAxisCount];",
            "",
            " private:",
            "  Query& set_index(AxisId a, std::int16_t index, std::int64_t value) noexcept {",
            "    const auto i = static_cast<std::size_t>(a);",
            "    index_[i] = index;",
            "    value_[i] = value;",
            "    given_[i] = true;",
            "    return *this;",
            "  }",
            "  Query& set_int(AxisId a, std::int64_t value) noexcept {",
            "    const auto i = static_cast<std::size_t>(a);",
            "    std::int16_t index = detail::kOutside;",
            "    for (detail::Index j = detail::kIntBegin[i]; j < detail::kIntBegin[i + 1]; ++j) {",
            "      if (detail::kIntValues[j] == value) {",
            "        index = static_cast<std::int16_t>(j - detail::kIntBegin[i]);",
            "        break;",
            "      }",
            "    }",
            "    return set_index(a, index, value);",
            "  }",
            "};",
            "",
        )

    def functions(self) -> None:
        self.emit(*_cpp_runtime.CORE)
        if self.roles:
            self.emit(*_cpp_runtime.ROLES)

    def render(self) -> str:
        self.banner()
        self.axis_types()
        self.tables()
        self.query()
        self.functions()
        self.emit(f"}}  // namespace {self.namespace}", "", f"#endif  // {self.guard}")
        return "\n".join(self.out) + "\n"


def cpp_header(
    data: dict[str, Any],
    kernels: Sequence[str],
    roles: Sequence[str] = (),
    *,
    namespace: str = "capmatrix",
    command: str = "capmatrix codegen cpp",
) -> str:
    """The C++17 header answering ``kernels`` (and every candidate of ``roles``) from ``data``.

    ``data`` is an artifact of :func:`capmatrix.authoring.export.export`; ``command`` is named in the banner.

    :raises CodegenError: for an unknown kernel or role, a name that cannot become a distinct C++
        identifier, an axis with more than 64 values, or an int outside ``(INT64_MIN, INT64_MAX]``.
    """
    return _Header(data, list(kernels), list(roles), namespace, command).render()

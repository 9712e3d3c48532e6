"""Kernel names → keys that compare across the styles profilers print them in.

The framework trace writes the full demangled signature::

    void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ...>(int, ...)

Nsight Compute writes, depending on `--print-kernel-base`, the function base
(`vectorized_elementwise_kernel`), a demangled signature whose template-dependent parameter
types are generic (`void gemm_v0<float>(T1 *, T1 *, int)`), or the mangled symbol
(`_Z7gemm_v0IfEvPT_S1_i`). extern "C" kernels (cuBLAS `ampere_sgemm_128x64_nn`, Triton,
NCCL in some versions) are the same plain identifier in every style.

Three strengths of key, strongest first:

=========  ================================================  =================================
key        what it keeps                                     from
=========  ================================================  =================================
full       qualified name + template arguments, no           demangled names; a plain
           parameters, no return type ``void``, no spaces    identifier is its own full key
base       the function's own name                           every style
family     base with every digit run replaced by ``#``       every style
=========  ================================================  =================================

Parameters are dropped from the full key because ncu's generic form (`T1 *`) cannot be
compared with the trace's concrete types; template arguments survive in both. The family key
groups algorithm variants (`ampere_sgemm_128x64_nn` and `ampere_sgemm_64x64_nn` →
`ampere_sgemm_#x#_nn`), which a different run may pick for the same call.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_TRAILING_QUALIFIERS = re.compile(r"(\s+(const|volatile)|\s*&&|\s*&)+$")
_GENERIC_PARAM = re.compile(r"\bT\d+\b")
_DIGITS = re.compile(r"\d+")
_WORDS = re.compile(r"[A-Za-z]+|\d+")
_OPENERS = {")": "(", ">": "<", "]": "[", "}": "{"}
# The anonymous namespace is spelt differently by different demanglers.
_ANONYMOUS = ("(anonymous namespace)", "(anonymousnamespace)", "<unnamed>")


@dataclass(frozen=True)
class NameKeys:
    """Keys of one kernel name; None where the name does not carry that information."""

    full: str | None
    base: str | None
    family: str | None


def keys_of(name: str | None) -> NameKeys:
    """Keys of a name in any style (demangled, generic-demangled, mangled, plain)."""
    if not name or not name.strip():
        return NameKeys(None, None, None)
    name = name.strip()
    if name.startswith("_Z"):
        base = mangled_base(name)
        return NameKeys(None, base, family_of(base))
    head = strip_parameters(name)
    base = _last_component(_strip_template_arguments(head))
    return NameKeys(_full_key(head), base, family_of(base))


def family_of(base: str | None) -> str | None:
    return _DIGITS.sub("#", base) if base else None


def words(base: str | None) -> frozenset[str]:
    """Lower-case alphabetic and numeric words of a base name (`ampere_sgemm_128x64_nn` →
    ampere, sgemm, 128, x, 64, nn)."""
    return frozenset(w.lower() for w in _WORDS.findall(base or ""))


def name_similarity(a: str | None, b: str | None) -> float:
    """Jaccard similarity of the words of two base names (1.0 when they are equal)."""
    wa, wb = words(a), words(b)
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / len(wa | wb)


def strip_parameters(name: str) -> str:
    """Signature without its trailing parameter list and cv/ref qualifiers."""
    text = _TRAILING_QUALIFIERS.sub("", name.strip())
    if not text.endswith(")"):
        return text
    start = _matching_open(text, len(text) - 1)
    return text[:start].rstrip() if start is not None and start > 0 else text


def mangled_base(symbol: str) -> str | None:
    """The function's own source name in an Itanium symbol (`_ZN2at6native6kernelIiEEvT_`
    → `kernel`, `_ZNSt6vectorIiE4sizeEv` → `size`): the last <length><name> of its leading
    (nested) name, template arguments of enclosing classes skipped."""
    i = 3 if symbol.startswith("_ZL") else 2  # L: internal linkage
    nested = symbol.startswith("N", i)
    i += nested
    while i < len(symbol) and symbol[i] in "rVKRO":  # cv- and ref-qualifiers of methods
        i += 1
    last = None
    while i < len(symbol):
        if symbol.startswith("St", i):  # ::std::
            i += 2
        elif symbol[i] == "S":  # substitution of an earlier prefix: S_, S0_, ...
            i = symbol.find("_", i) + 1 or len(symbol)
        elif symbol[i] == "I" and nested:
            i = _after_template_arguments(symbol, i)
        elif (digits := _DIGITS.match(symbol, i)) is not None:
            start = digits.end()
            last, i = symbol[start:start + int(digits.group())], start + int(digits.group())
            if not nested:
                break
        else:
            break
    return last or None


def _after_template_arguments(symbol: str, i: int) -> int:
    """Index after the I...E block starting at i (nested names, function types, packs and
    expressions inside close with E too; literals L...E and source names are skipped)."""
    depth = 0
    while i < len(symbol):
        ch = symbol[i]
        if ch in "INFJX":
            depth, i = depth + 1, i + 1
        elif ch == "E":
            depth, i = depth - 1, i + 1
            if depth == 0:
                return i
        elif ch == "L":
            i = symbol.find("E", i) + 1 or len(symbol)
        elif (digits := _DIGITS.match(symbol, i)) is not None:
            i = digits.end() + int(digits.group())
        else:
            i += 1
    return i


def _full_key(head: str) -> str | None:
    text = head[5:] if head.startswith("void ") else head
    for spelling in _ANONYMOUS:
        text = text.replace(spelling, "(anonymous namespace)")
    text = re.sub(r"\s+", "", text)
    # ncu's generic form cannot be compared where a template argument itself is generic.
    return None if _GENERIC_PARAM.search(text) else text


def _strip_template_arguments(text: str) -> str:
    if not text.endswith(">"):
        return text
    start = _matching_open(text, len(text) - 1)
    return text[:start] if start is not None else text


def _matching_open(text: str, close_at: int) -> int | None:
    """Index of the bracket opening the one at `close_at`, scanning backwards; brackets of
    other kinds nest inside (a `>` inside parentheses, as in `enable_if<(8)>(0)>`, is not
    counted)."""
    stack: list[str] = []
    for i in range(close_at, -1, -1):
        ch = text[i]
        if ch in _OPENERS:
            if ch == ">" and stack and stack[-1] == "(" and i != close_at:
                continue  # comparison operator inside parentheses
            stack.append(_OPENERS[ch])
        elif ch in "(<[{":
            if ch == "<" and stack and stack[-1] == "(":
                continue
            if not stack or stack[-1] != ch:
                return None
            stack.pop()
            if not stack:
                return i
    return None


def _last_component(text: str) -> str | None:
    """Text after the last top-level `::` or space: scopes and return type dropped."""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch in ")>]}":
            depth += 1
        elif ch in "(<[{":
            depth -= 1
        elif depth == 0 and (ch == " " or (ch == ":" and text[i - 1:i] == ":")):
            return text[i + 1:].strip() or None
    return text.strip() or None

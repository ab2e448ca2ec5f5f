"""An algorithm's cost formula, read from its docstrings, evaluated and substituted.

The ``Cost:`` paragraph of an algorithm's docstring gives its headline closed form; its cost
function's docstring may add the case for p not a power of two, a bound or an estimate.
:func:`evaluate` computes a formula from p, p', n, α, β, γ (and k, s for a segmented algorithm),
:func:`applicable_formula` picks the one that gives the registered cost function's value at this
p, and :func:`substitute` writes the numbers into it for printing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mpisim.collectives import registry

_SYMBOL_CHARS = set("pnαβγṗks")


def cost_paragraph(doc: str) -> str:
    """Return the docstring's ``Cost`` paragraph (one line), or '' if it has none."""
    paragraphs = re.split(r"\n\s*\n", doc)
    for para in paragraphs:
        text = " ".join(line.strip() for line in para.splitlines())
        if text.startswith("Cost"):
            return text
    return ""


def cost_formula(paragraph: str) -> str:
    """Cut the formula out of a ``Cost...: <formula> <commentary>`` paragraph."""
    match = re.match(r"Cost[^:]*:\s*(.*)", paragraph)
    if not match:
        return ""
    text = match.group(1)
    cut = len(text)
    for stop in (" if ", "; ", " (see", ". ", ", n =", " for p", " -- ", ": ", " Exact", ", plus", ", exact",
                 " with ", ", the ", " Thakur"):
        at = text.find(stop)
        if 0 < at < cut:
            cut = at
    return text[:cut].strip().rstrip(".,;")


class FormulaError(ValueError):
    """A formula uses notation or symbols :func:`evaluate` does not know."""


_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|(T_last|s_last|p'|lg|[pnαβγksTD])|([-+/·()⌈⌉⌊⌋]))")
#: Symbols a formula may define in terms of others (``T = α + sβ``), from the docstrings.
_DEFINED = ("T", "s_last", "T_last", "D")


def evaluate(formula: str, values: dict[str, float]) -> float:
    """Evaluate a cost formula written as the docstrings write them, with *values* for its symbols.

    The notation: ``lg`` is log2 of the atom after it (``lg p·α``, ``⌊lg p⌋``), ``⌈x⌉`` and
    ``⌊x⌋`` round, ``p'`` is a symbol of its own (the largest power of two below p), ``·`` or
    juxtaposition multiplies (``2((p-1)/p)nβ``), and ``/`` binds like a product, left to right.
    Segmented algorithms also use k (segments), s (segment bytes) and the symbols the docstrings
    define from them (T, T_last, s_last, D), which *values* must then hold. Raises FormulaError
    for anything else.
    """
    tokens: list[str] = []
    pos = 0
    text = formula.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise FormulaError(f"cannot read {text[pos:]!r}")
        tokens.append(next(g for g in match.groups() if g is not None))
        pos = match.end()
    at = 0

    def peek() -> str | None:
        return tokens[at] if at < len(tokens) else None

    def take() -> str:
        nonlocal at
        at += 1
        return tokens[at - 1]

    def atom() -> float:
        tok = take() if peek() is not None else ""
        if tok == "lg":
            return math.log2(atom())
        if tok in ("(", "⌈", "⌊"):
            inner = expr()
            closing = {"(": ")", "⌈": "⌉", "⌊": "⌋"}[tok]
            if take() != closing:
                raise FormulaError(f"unbalanced {tok!r}")
            return inner if tok == "(" else math.ceil(inner - 1e-12) if tok == "⌈" else math.floor(inner + 1e-12)
        if tok in values:
            return values[tok]
        try:
            return float(tok)
        except ValueError:
            raise FormulaError(f"unknown symbol {tok!r}") from None

    def term() -> float:
        value = atom()
        while peek() is not None and peek() not in ("+", "-", ")", "⌉", "⌋"):
            op = peek()
            if op in ("/", "·"):
                take()
            rhs = atom()
            value = value / rhs if op == "/" else value * rhs
        return value

    def expr() -> float:
        value = term()
        while peek() in ("+", "-"):
            value = value + term() if take() == "+" else value - term()
        return value

    result = expr()
    if at != len(tokens):
        raise FormulaError(f"unexpected {tokens[at]!r}")
    return result


@dataclass(frozen=True)
class Formula:
    """A closed form as written in a docstring, and for which rank counts it is written."""

    text: str
    scope: str  # "p a power of two", "p not a power of two", or "" (any p)
    note: str = ""  # "an upper bound" ("at most") or "an estimate" ("about"); "" for the formula itself


def formulas(algo: registry.Algorithm) -> list[Formula]:
    """Return the closed forms an algorithm's docstrings state: the general one, then special cases.

    The algorithm's ``Cost:`` paragraph gives the headline formula; its cost function's
    docstring may add the one for p not a power of two (``Otherwise (p' = ...): ...``) or a
    bound (``else at most ...``).
    """
    paragraph = cost_paragraph(algo.description or "")
    head = cost_formula(paragraph).split(" for ")[0].split(", T =")[0].strip()
    cost_doc = " ".join((getattr(algo.cost, "__doc__", None) or "").split())
    first = cost_doc.split(". ")[0]
    pof2 = "p a power of two" in first or "for p a power of two" in paragraph
    out = [Formula(head, "p a power of two" if pof2 else "")] if head else []
    for pattern, note in ((r"Otherwise \(p' = [^)]*\):\s*(.+?)(?:\s--|\.\s|\.$|$)", ""),
                          (r"else at most\s*(.+?)(?:\.\s|\.$|$)", "an upper bound"),
                          (r"otherwise about\s*(.+?)(?:, see|\.\s|\.$|$)", "an estimate")):
        match = re.search(pattern, cost_doc) or re.search(pattern, paragraph)
        if match:
            out.append(Formula(match.group(1).strip().rstrip(".,;"), "p not a power of two", note))
    # A case of its own for two ranks (the parameter server's one worker): "(p = 2): <formula> -- why".
    match = re.search(r"\(p = 2\):\s*(.+?)(?:\s--|\.\s|\.$|$)", cost_doc)
    if match:
        out.append(Formula(match.group(1).strip().rstrip(".,;"), "p = 2"))
    return out


def definitions(algo: registry.Algorithm) -> dict[str, str]:
    """Return the auxiliary symbols the docstrings define (``T = α + sβ``), symbol -> formula."""
    text = " ".join(((algo.description or "") + " " + (getattr(algo.cost, "__doc__", None) or "")).split())
    out: dict[str, str] = {}
    for name in _DEFINED:
        match = re.search(rf"(?<![\w]){name} = ([^,;()]+?(?:\([^)]*\)[^,;()]*?)?)(?=\s+for\b|,|;|\)|\.\s|$)", text)
        if match and name not in out:
            out[name] = match.group(1).strip()
    return out


def with_definitions(algo: registry.Algorithm, values: dict[str, float]) -> dict[str, float]:
    """Return *values* plus every defined symbol (T, T_last, ...) that can be evaluated from them."""
    values = dict(values)
    pending = dict(definitions(algo))
    while pending:
        done = []
        for name, text in pending.items():
            try:
                values[name] = evaluate(text, values)
                done.append(name)
            except (FormulaError, ValueError, ZeroDivisionError):
                continue
        if not done:
            break
        for name in done:
            del pending[name]
    return values


def applicable_formula(algo: registry.Algorithm, values: dict[str, float], model_s: float) -> Formula | None:
    """Return the docstring formula that gives the registered cost function's value here, if any.

    *values* holds p, p', n, α, β, γ (and k, s for a segmented algorithm).
    """
    values = with_definitions(algo, values)
    for formula in formulas(algo):
        try:
            value = evaluate(formula.text, values)
        except (FormulaError, ValueError, ZeroDivisionError):
            continue
        if math.isclose(value, model_s, rel_tol=1e-6, abs_tol=1e-15):
            return formula
    return None


def pof2_below(p: int) -> int:
    """The largest power of two below *p* (p itself is not below), at least 1: the p' of the formulas."""
    q = 1 << (p.bit_length() - 1)
    return max(q // 2 if q == p else q, 1)


def substitute(formula: str, values: dict[str, str]) -> str:
    """Replace the symbols p, n, α, β, γ in *formula* by *values*, with ``·`` for implicit products.

    A symbol is replaced only where it stands alone (``lg p``, ``nβ``, ``(p-1)``), not inside
    a word (``T_last``). Symbols without a value are left as they are.
    """
    out: list[str] = []
    last_was_value = False
    if "p'" in values:  # p' is one symbol: swap in a stand-in that no word contains
        formula = formula.replace("p'", "ṗ")
        values = {**values, "ṗ": values["p'"]}
    for i, ch in enumerate(formula):
        prev = formula[i - 1] if i > 0 else " "
        nxt = formula[i + 1] if i + 1 < len(formula) else " "
        # A letter before or after makes it part of a word, unless that letter is a symbol too (nβ).
        prev_ok = prev in _SYMBOL_CHARS or not (prev.isascii() and (prev.isalpha() or prev == "_"))
        next_ok = nxt in _SYMBOL_CHARS or not (nxt.isascii() and (nxt.isalnum() or nxt == "_"))
        standalone = ch in _SYMBOL_CHARS and ch in values and prev_ok and next_ok
        if standalone:
            if out and (out[-1][-1:].isalnum() or out[-1][-1:] in (")", "⌉", "⌋") or last_was_value):
                out.append("·")
            out.append(values[ch])
            last_was_value = True
            continue
        if last_was_value and ch == "(":
            out.append("·")
        out.append(ch)
        last_was_value = False
    return "".join(out)

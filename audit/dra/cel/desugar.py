"""Rewriting the selector syntax the ``cel`` binding cannot parse into plain CEL it runs.

Kubernetes' selector environment is cel-go with optional types, ``cel.bind`` and the
two-variable comprehensions enabled (``k8s.io/apiserver/pkg/cel/environment/base.go``, the base
environment of ``k8s.io/dynamic-resource-allocation/cel/compile.go``). The Rust parser of ``cel``
refuses optional selection (``m.?f``, ``m[?k]``) and optional entries of list and map literals
(``[?x]``, ``{?k: v}``), and it expands only the one-variable macros. ``desugar`` rewrites:

* ``X.?f`` and ``X[?k]`` into ``X._ct_opt_field("f")`` / ``X._ct_opt_index(k)`` (chains work
  because the helpers take an optional receiver); on ``device.attributes`` and
  ``device.capacity`` into ``_ct_opt_domain``, since those maps answer every domain;
* ``[a, ?b]`` and ``{k: v, ?k2: v2}`` into helpers over the entries, each plain one wrapped in
  ``optional.of``;
* ``X.optMap(v, e)`` / ``X.optFlatMap(v, e)`` into ``map`` over a list of zero or one value;
* ``cel.bind(v, init, e)`` into ``[init].map(v, e)[0]``;
* ``X.all(k, v, p)`` and the other two-variable macros (``exists``, ``exists_one``,
  ``existsOne``, ``transformList``, ``transformMap``, ``transformMapEntry``) into the one-variable
  macros over ``[key or index, value]`` pairs, the two names replaced by ``p[0]`` and ``p[1]``;
* ``X.sortBy(v, key)`` into ``X.map(v, [key, v])`` sorted by the first element;
* the receiver of every one-variable macro (``all``, ``exists``, ``exists_one``, ``map``,
  ``filter``) into ``X._ct_in_order()``, which gives a map's keys in one fixed order (the
  binding, like cel-go, iterates a map in a random order), and the pairs of a two-variable macro
  over a map likewise.

Method-call form keeps each rewrite exactly where the postfix operator was, so precedence does
not change. The static checks run on the source as written; only the program runs the rewrite.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from audit.dra.cel.syntax import Token, closing, split_arguments, tokenize

# Rewrites the source of a token range [start, end) of the expression being rewritten.
_Text = Callable[[int, int], str]

_TWO_VARIABLE = frozenset({"all", "exists", "exists_one", "existsOne", "transformList", "transformMap",
                           "transformMapEntry"})
# Macros that bind names of their own (in their first one or two arguments).
_BINDING = _TWO_VARIABLE | {"map", "filter", "optMap", "optFlatMap", "sortBy"}
_ONE_VARIABLE = frozenset({"all", "exists", "exists_one", "map", "filter"})
_MAY_NEED = re.compile(r"\?|\bbind\b|\boptMap\b|\boptFlatMap\b|\bsortBy\b|\btransform|\bexists|\ball\b|\bmap\b"
                       r"|\bfilter\b")
# Tokens after which ``[`` indexes the value before it rather than opening a list literal.
_VALUE_END = frozenset({")", "]", "}"})


def desugar(source: str) -> str:
    """``source`` with every construct above rewritten; unchanged when it has none."""
    if not _MAY_NEED.search(source):
        return source
    return _Rewriter().rewrite(source)


def _is(tokens: list[Token], i: int, text: str) -> bool:
    return 0 <= i < len(tokens) and tokens[i].kind == "punct" and tokens[i].text == text


def _indexes(tokens: list[Token], i: int) -> bool:
    """Whether the ``[`` at ``i`` indexes the value before it (else it opens a list literal)."""
    before = tokens[i - 1] if i > 0 else None
    if before is None or (before.kind == "ident" and before.text == "in"):
        return False
    return before.kind in ("ident", "string", "number") or before.text in _VALUE_END


def _entry_colon(tokens: list[Token], start: int, end: int) -> int | None:
    """Index of the ``:`` separating a map entry's key from its value (ternaries skipped)."""
    depth = pending = 0
    for j in range(start, end):
        t = tokens[j]
        if t.kind != "punct":
            continue
        if t.text in "([{":
            depth += 1
        elif t.text in ")]}":
            depth -= 1
        elif depth == 0 and t.text == "?":
            pending += 1
        elif depth == 0 and t.text == ":":
            if pending == 0:
                return j
            pending -= 1
    return None


class _Rewriter:
    def __init__(self) -> None:
        self._names = 0

    def _fresh(self) -> str:
        self._names += 1
        return f"_ct_e{self._names}"

    def rewrite(self, source: str) -> str:
        tokens = tokenize(source)

        def text(start: int, end: int) -> str:
            """The source of tokens [start, end), rewritten."""
            if start >= end:
                return ""
            return self.rewrite(source[tokens[start].offset:tokens[end - 1].end])

        def domain_map_before(i: int) -> bool:
            """Whether the tokens before ``i`` are exactly ``device.attributes`` or ``device.capacity``."""
            return (i >= 3 and tokens[i - 1].text in ("attributes", "capacity") and _is(tokens, i - 2, ".")
                    and tokens[i - 3].text == "device" and tokens[i - 3].kind == "ident"
                    and not _is(tokens, i - 4, "."))

        out: list[str] = []
        copied = 0
        i = 0
        while i < len(tokens):
            t = tokens[i]
            replacement: str | None = None
            begin, last = t.offset, i
            if _is(tokens, i, ".") and _is(tokens, i + 1, "?") and i + 2 < len(tokens) and tokens[i + 2].kind == "ident":
                helper = "_ct_opt_domain" if domain_map_before(i) else "_ct_opt_field"
                replacement, last = f'.{helper}("{tokens[i + 2].text}")', i + 2
            elif _is(tokens, i, "[") and _is(tokens, i + 1, "?"):
                close = closing(tokens, i)
                if close < len(tokens):
                    if _indexes(tokens, i):
                        helper = "_ct_opt_domain" if domain_map_before(i) else "_ct_opt_index"
                        replacement = f".{helper}({text(i + 2, close)})"
                    else:
                        replacement = self._list_literal(tokens, i, close, text)
                    last = close
            elif _is(tokens, i, "[") and not _indexes(tokens, i):
                close = closing(tokens, i)
                if close < len(tokens) and any(_is(tokens, a, "?") for a, _ in split_arguments(tokens, i, close)):
                    replacement, last = self._list_literal(tokens, i, close, text), close
            elif _is(tokens, i, "{"):
                close = closing(tokens, i)
                if close < len(tokens) and any(_is(tokens, a, "?") for a, _ in split_arguments(tokens, i, close)):
                    replacement, last = self._map_literal(tokens, i, close, text), close
            elif t.kind == "ident" and _is(tokens, i - 1, ".") and _is(tokens, i + 1, "("):
                close = closing(tokens, i + 1)
                if close < len(tokens):
                    replacement = self._macro(source, tokens, i, close, text)
                    # The rewritten call replaces the dot before it too.
                    begin, last = tokens[i - 1].offset, close
            elif (t.kind == "ident" and t.text == "cel" and not _is(tokens, i - 1, ".") and _is(tokens, i + 1, ".")
                  and i + 2 < len(tokens) and tokens[i + 2].text == "bind" and _is(tokens, i + 3, "(")):
                close = closing(tokens, i + 3)
                args = split_arguments(tokens, i + 3, close) if close < len(tokens) else []
                if len(args) == 3 and args[0][1] - args[0][0] == 1 and tokens[args[0][0]].kind == "ident":
                    name = tokens[args[0][0]].text
                    replacement = f"([{text(*args[1])}].map({name}, {text(*args[2])})[0])"
                    last = close
            if replacement is None:
                i += 1
                continue
            out.append(source[copied:begin])
            out.append(replacement)
            copied = tokens[last].end
            i = last + 1
        out.append(source[copied:])
        return "".join(out)

    def _list_literal(self, tokens: list[Token], open_index: int, close: int, text: _Text) -> str:
        entries = []
        for start, end in split_arguments(tokens, open_index, close):
            entries.append(text(start + 1, end) if _is(tokens, start, "?") else f"optional.of({text(start, end)})")
        return f"_ct_opt_list_literal([{', '.join(entries)}])"

    def _map_literal(self, tokens: list[Token], open_index: int, close: int, text: _Text) -> str:
        entries = []
        for start, end in split_arguments(tokens, open_index, close):
            optional = _is(tokens, start, "?")
            key_start = start + 1 if optional else start
            colon = _entry_colon(tokens, key_start, end)
            if colon is None:
                return f"{{{text(open_index + 1, close)}}}"  # not a map literal this can read: left to the parser
            value = text(colon + 1, end)
            entries.append(f"[{text(key_start, colon)}, {value if optional else f'optional.of({value})'}]")
        return f"_ct_opt_map_literal([{', '.join(entries)}])"

    def _macro(self, source: str, tokens: list[Token], name_index: int, close: int, text: _Text) -> str | None:
        """The rewrite of the method call ``.name(...)`` at ``name_index``, or None to keep it."""
        name = tokens[name_index].text
        args = split_arguments(tokens, name_index + 1, close)

        def variable(k: int) -> str | None:
            start, end = args[k]
            return tokens[start].text if end - start == 1 and tokens[start].kind == "ident" else None

        if name in ("optMap", "optFlatMap") and len(args) == 2 and variable(0):
            back = "_ct_opt_from_list" if name == "optMap" else "_ct_opt_flat_from_list"
            return f"._ct_opt_as_list().map({variable(0)}, {text(*args[1])}).{back}()"
        if name == "sortBy" and len(args) == 2 and variable(0):
            var = variable(0)
            return f".map({var}, [{text(*args[1])}, {var}])._ct_sort_by_keys()"
        if name in _ONE_VARIABLE and variable(0) and (len(args) == 2 or (len(args) == 3 and name == "map")):
            return f"._ct_in_order().{name}({', '.join(text(*a) for a in args)})"
        if name not in _TWO_VARIABLE or len(args) not in (3, 4) or not variable(0) or not variable(1):
            return None
        if len(args) == 4 and not name.startswith("transform"):
            return None
        pair = self._fresh()
        names = {variable(0) or "": f"{pair}[0]", variable(1) or "": f"{pair}[1]"}

        def body(k: int) -> str:
            return self.rewrite(_substitute(source, tokens, *args[k], names))

        select = f".filter({pair}, {body(2)})" if len(args) == 4 else ""
        result = body(len(args) - 1)
        if name in ("all", "exists"):
            return f"._ct_pairs().{name}({pair}, {result})"
        if name in ("exists_one", "existsOne"):
            return f"._ct_pairs().exists_one({pair}, {result})"
        if name == "transformList":
            return f"._ct_pairs(){select}.map({pair}, {result})"
        if name == "transformMap":
            return f"._ct_pairs(){select}.map({pair}, [{pair}[0], {result}])._ct_pairs_to_map()"
        return f"._ct_pairs(){select}.map({pair}, {result})._ct_merge_entries()"


def _substitute(source: str, tokens: list[Token], start: int, end: int, names: dict[str, str]) -> str:
    """The source of tokens [start, end) with every reference to a name in ``names`` replaced.
    Field names after ``.`` or ``.?`` are not references, and inside a macro that binds one of
    the names again that name is the macro's own."""
    out: list[str] = []
    copied = tokens[start].offset
    j = start
    while j < end:
        t = tokens[j]
        after_dot = _is(tokens, j - 1, ".") or (_is(tokens, j - 1, "?") and _is(tokens, j - 2, "."))
        if t.kind == "ident" and after_dot and t.text in _BINDING and _is(tokens, j + 1, "("):
            close = closing(tokens, j + 1)
            args = split_arguments(tokens, j + 1, close) if close < end else []
            binders = {tokens[a].text for a, b in args[:2] if b - a == 1 and tokens[a].kind == "ident"}
            if binders & names.keys():
                inner = {k: v for k, v in names.items() if k not in binders}
                out.append(source[copied:tokens[j + 1].end])
                parts = [_substitute(source, tokens, a, b, inner) if inner else source[tokens[a].offset:tokens[b - 1].end]
                         for a, b in args]
                out.append(", ".join(parts))
                copied = tokens[close].offset
                j = close
                continue
        if t.kind == "ident" and t.text in names and not after_dot:
            out.append(source[copied:t.offset])
            out.append(names[t.text])
            copied = t.end
        j += 1
    out.append(source[copied:tokens[end - 1].end])
    return "".join(out)

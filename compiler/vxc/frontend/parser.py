"""Source bytes -> AST, with every failure turned into a diagnostic."""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import lark
from lark import Token, Transformer, v_args

from vxc import collector
from vxc.diagnostics import DiagnosticSink, Span
from vxc.frontend import ast as A

# The grammar and its tables lie beside this file (read directly: importlib.resources
# would add ~10 ms of imports to every cold `vxc check`, vxc/targets.py's model_source).
HERE = Path(__file__).parent

MAX_DEPTH = 200  # deeper trees are E0004: keeps every recursive pass far from Python's limit

# LANGUAGE.md section 1: reserved words, plus the two P0-2 intrinsic forms. The contextual
# lexer would otherwise accept them wherever only a name can follow (`let fn = 1;`).
KEYWORDS = frozenset(
    "fn let mut for in if else return on spawn where const Memory Topology transfer relaxed "
    "sync true false extern transfer_async wait".split()
)

UNITS = {
    "B": 1,
    "KB": 1 << 10,
    "KiB": 1 << 10,
    "MB": 1 << 20,
    "MiB": 1 << 20,
    "GB": 1 << 30,
    "GiB": 1 << 30,
    "TB": 1 << 40,
    "TiB": 1 << 40,
}


WORD_LITERAL = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"')
TERMINAL_DEF = re.compile(r"^\s*([A-Z_][A-Z0-9_]*)(\.\d+)?\s*:", re.M)


def _whole_word_keywords(grammar: str) -> str:
    """Every word-like literal of the rules (`"fn"`, `"Tensor"`, ...) becomes a terminal
    that matches only a whole word: `fnf` is one name, never `fn` then `f`.

    lark's contextual lexer offers only the terminals a parser state accepts; where a
    name cannot stand (before an item, `fnf() {}`), a plain string terminal matched the
    prefix of a longer word. The terminals are lark's own names with a `_` (`_FN`,
    `_TENSOR`), so they stay out of the tree and "expected one of" lists sort as before.
    """
    defined = set(TERMINAL_DEF.findall(grammar))
    defined_names = {name for name, _ in defined}
    words: dict[str, str] = {}
    lines = []
    for line in grammar.splitlines():
        if not TERMINAL_DEF.match(line):
            for w in WORD_LITERAL.findall(line.split("//")[0]):
                if w.upper() not in defined_names:
                    words[w] = "_" + w.upper()  # `_`: filtered from the tree, as literals are
            line = WORD_LITERAL.sub(lambda m: words.get(m.group(1), m.group(0)), line)
        lines.append(line)
    lines += [f"{t}.2: /{w}(?![A-Za-z0-9_])/" for w, t in sorted(words.items())]
    return "\n".join(lines) + "\n"


@cache
def keyword_terminals() -> dict[str, str]:
    """Terminal name -> the word it matches, for the terminals made above."""
    grammar = (HERE / "grammar.lark").read_text(encoding="utf-8")
    defined_names = {name for name, _ in TERMINAL_DEF.findall(grammar)}
    return {
        "_" + w.upper(): w
        for line in grammar.splitlines()
        if not TERMINAL_DEF.match(line)
        for w in WORD_LITERAL.findall(line.split("//")[0])
        if w.upper() not in defined_names
    }


def grammar_text() -> str:
    """The grammar lark compiles: grammar.lark with its keywords made whole-word terminals."""
    return _whole_word_keywords((HERE / "grammar.lark").read_text(encoding="utf-8"))


def build_lark(grammar: str) -> lark.Lark:
    """The LALR parser, its tables built from `grammar_text()` (~0.1-0.2 s)."""
    return lark.Lark(
        grammar,
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=True,
        lexer_callbacks={"NAME": _reject_keyword},
    )


def _untag(obj: dict) -> object:
    """json object_hook: the tuples and integer-keyed dicts tools/gen_parser_tables.py tagged."""
    if "__tuple__" in obj:
        return tuple(obj["__tuple__"])
    if "__intdict__" in obj:
        return {k: v for k, v in obj["__intdict__"]}
    return obj


@cache
def _lark() -> lark.Lark:
    """The parser, from the prebuilt tables of grammar_tables.json when they are of this
    grammar and this lark (tools/gen_parser_tables.py writes them; a test checks they are
    fresh), else built from the grammar."""
    grammar = grammar_text()
    try:
        raw = (HERE / "grammar_tables.json").read_bytes()
        tables = json.loads(raw, object_hook=_untag)
    except (OSError, ValueError):
        tables = {}
    if (
        tables.get("grammar_sha256") == hashlib.sha256(grammar.encode()).hexdigest()
        and tables.get("lark_version") == lark.__version__
    ):
        return lark.Lark._load_from_dict(
            tables["data"], tables["memo"], lexer_callbacks={"NAME": _reject_keyword}
        )
    return build_lark(grammar)


class _Keyword(Exception):
    """A reserved word where only a name can stand."""

    def __init__(self, tok: Token):
        super().__init__(str(tok))
        self.tok = tok


def _reject_keyword(tok: Token) -> Token:
    if tok in KEYWORDS:
        raise _Keyword(tok)
    return tok


class _Invalid(Exception):
    """A literal that parsed but has no value (E0005)."""

    def __init__(self, message: str, span: Span):
        super().__init__(message)
        self.span = span


I64_MAX = (1 << 63) - 1


def _shown(tok: Token) -> str:
    """A literal as a message quotes it: a 5 000-digit literal is cut, not echoed."""
    text = str(tok)
    return (
        f"`{text}`" if len(text) <= 40 else f"`{text[:12]}...{text[-4:]}` ({len(text)} characters)"
    )


def _int(tok: Token, file: str) -> int:
    digits = str(tok).replace("_", "").lstrip("0") or "0"
    # Checked on the digits first: int() refuses more than 4 300 digits (ValueError).
    if len(digits) > 19 or int(digits) > I64_MAX:
        raise _Invalid(
            f"integer literal {_shown(tok)} does not fit in 64 bits", _tok_span(tok, file)
        )
    return int(digits)


def _scaled(value: int | float, unit: int, what: str, span: Span) -> int:
    """A size or a rate in bytes: finite and within 64 bits, or E0005."""
    if not math.isfinite(value) or value * unit > I64_MAX:
        raise _Invalid(f"{what} does not fit in 64 bits (at most {I64_MAX} bytes)", span)
    return int(value * unit)


def _tok_span(tok: Token, file: str) -> Span:
    return Span(
        file,
        tok.line,
        tok.column,
        tok.end_line or tok.line,
        tok.end_column or tok.column + len(tok),
    )


def _facet_value(v) -> tuple[str, object, str]:
    """Normalise a facet's right-hand side to (kind, value, unit)."""
    if isinstance(v, tuple):
        return v
    if isinstance(v, A.MemPath):
        return ("memory", v.name, "")
    if isinstance(v, A.TopoPath):
        return ("topology", v.name, "")
    if isinstance(v, A.SizeLit):
        return ("size", v.value, "")
    return ("int", v.value, "")


@v_args(meta=True)
class _ToAst(Transformer):
    """lark tree -> dataclasses. One method per grammar alias; each is one line of logic."""

    def __init__(self, file: str):
        super().__init__()
        self.file = file

    def _s(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.file, 1, 1)
        return Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column)

    # items
    def start(self, meta, items):
        return A.Module(self._s(meta), tuple(items))

    def memory_decl(self, meta, c):
        return A.MemoryDecl(self._s(meta), str(c[0]), tuple(f for f in c[1:] if f is not None))

    def topology_decl(self, meta, c):
        body = [x for x in c[1:] if x is not None]
        facets = tuple(x for x in body if isinstance(x, A.Facet))
        edges = tuple(x for x in body if isinstance(x, A.Edge))
        return A.TopologyDecl(self._s(meta), str(c[0]), facets, edges)

    def edge(self, meta, c):
        relaxed = len(c) > 3 and str(c[3]) == "relaxed"
        return A.Edge(self._s(meta), c[0].name, c[1].name, _int(c[2], self.file), relaxed)

    def facet(self, meta, c):
        kind, value, unit = _facet_value(c[1])
        return A.Facet(self._s(meta), str(c[0]), kind, value, unit)

    def path_list(self, meta, c):
        return ("list", tuple(x.name for x in c if x is not None), "")

    def size(self, meta, c):
        value = _int(c[0], self.file)
        span = self._s(meta)
        size = _scaled(value, UNITS[str(c[1])], f"size {_shown(c[0])} {c[1]}", span)
        return A.SizeLit(span, size)

    def rate(self, meta, c):
        unit, per = str(c[1]).split("/")
        amount = (
            float(str(c[0]).replace("_", "")) if c[0].type == "FLOAT" else _int(c[0], self.file)
        )
        what = f"rate {_shown(c[0])} {c[1]}"
        return ("rate", _scaled(amount, UNITS[unit], what, self._s(meta)), per)

    def word(self, meta, c):
        return ("word", str(c[0]), "")

    def mem_path(self, meta, c):
        return A.MemPath(self._s(meta), str(c[0]))

    def topo_path(self, meta, c):
        return A.TopoPath(self._s(meta), str(c[0]))

    def fn_decl(self, meta, c):
        return self._fn(meta, c, c[6])

    def extern_fn(self, meta, c):
        return self._fn(meta, [*c, None], None)  # no where clause

    def _fn(self, meta, c, body):
        name, generics, params, ret, placement, where = c[:6]
        return A.FnDecl(
            self._s(meta),
            str(name),
            generics or (),
            params or (),
            ret,
            placement.name if placement else None,
            where or (),
            body,
            _tok_span(name, self.file),
        )

    def generics(self, meta, c):
        return tuple(c)

    def const_param(self, meta, c):
        return A.Param(self._s(meta), str(c[0]), c[1], c[2] if len(c) > 2 else None)

    def const_default(self, meta, c):
        return _int(c[0], self.file)

    def const_default_neg(self, meta, c):
        return -_int(c[0], self.file)

    def params(self, meta, c):
        return tuple(c)

    def param(self, meta, c):
        return A.Param(self._s(meta), str(c[0]), c[1])

    def placement(self, meta, c):
        return c[0]

    def where_clause(self, meta, c):
        return tuple(c)

    # types
    def mut_ref_type(self, meta, c):
        return A.RefType(self._s(meta), True, c[0])

    def ref_type(self, meta, c):
        return A.RefType(self._s(meta), False, c[0])

    def tensor_type(self, meta, c):
        return A.TensorType(self._s(meta), c[0], c[1])

    def vec_type(self, meta, c):
        return A.VecType(self._s(meta), c[0])

    def token_type(self, meta, c):
        return A.TokenType(self._s(meta), c[0], c[1].name)

    def named_type(self, meta, c):
        return A.NamedType(self._s(meta), str(c[0]))

    def dims(self, meta, c):
        return tuple(d for d in c if d is not None)

    def dim_int(self, meta, c):
        return _int(c[0], self.file)

    def dim_name(self, meta, c):
        return str(c[0])

    def _dim_op(self, op: str, meta, c) -> A.DimExpr:
        return A.DimExpr(self._s(meta), op, c[0], c[1])

    def dim_add(self, meta, c):
        return self._dim_op("+", meta, c)

    def dim_sub(self, meta, c):
        return self._dim_op("-", meta, c)

    def dim_mul(self, meta, c):
        return self._dim_op("*", meta, c)

    def dim_div(self, meta, c):
        return self._dim_op("/", meta, c)

    # statements
    def block(self, meta, c):
        return A.Block(self._s(meta), tuple(c))

    def let_stmt(self, meta, c):
        mutable = isinstance(c[0], Token) and c[0].type == "MUT"
        rest = c[1:] if mutable else c
        # The span is the bound name: E6011 and friends point at the binding itself.
        return A.Let(_tok_span(rest[0], self.file), str(rest[0]), mutable, rest[1], rest[2])

    def assign_stmt(self, meta, c):
        return A.Assign(self._s(meta), str(c[0]), c[1])

    def expr_stmt(self, meta, c):
        return A.ExprStmt(self._s(meta), c[0])

    def return_stmt(self, meta, c):
        return A.Return(self._s(meta), c[0])

    def for_stmt(self, meta, c):
        return A.For(self._s(meta), str(c[0]), c[1], c[2], c[3])

    def if_stmt(self, meta, c):
        orelse = c[2]
        if isinstance(orelse, A.If):  # `else if` is an else block holding one if
            orelse = A.Block(orelse.span, (orelse,))
        return A.If(self._s(meta), c[0], c[1], orelse)

    def spawn_stmt(self, meta, c):
        return A.Spawn(self._s(meta), c[0].name, c[1])

    # expressions
    def _bin(self, meta, c):
        return A.Binary(self._s(meta), str(c[1]), c[0], c[2])

    binop_cmp = binop_add = binop_mul = binop_logic = _bin

    def cmp_op(self, meta, c):
        return str(c[0])

    add_op = mul_op = bor_op = band_op = cmp_op

    def binop_or(self, meta, c):
        return A.Binary(self._s(meta), "||", c[0], c[1])

    def binop_and(self, meta, c):
        return A.Binary(self._s(meta), "&&", c[0], c[1])

    def neg(self, meta, c):
        return A.Unary(self._s(meta), "-", c[0])

    def not_(self, meta, c):
        return A.Unary(self._s(meta), "!", c[0])

    def borrow(self, meta, c):
        return A.Borrow(self._s(meta), False, c[0])

    def borrow_mut(self, meta, c):
        return A.Borrow(self._s(meta), True, c[0])

    def _callee(self, target) -> str:
        if not isinstance(target, A.Name):
            raise _Invalid("only named functions can be called", target.span)
        return target.name

    def call(self, meta, c):
        callee, args = self._callee(c[0]), c[1] or ()
        if callee == "edge":
            return self._edge(meta, args)
        return A.Call(self._s(meta), callee, args)

    def _edge(self, meta, args):
        """`edge(x[lo .. hi, ...], fill)` (LANGUAGE.md 4.2): a view marked as reaching past
        the tensor's end; a store's destination may leave out the fill (nothing is read).
        Any other form stays a call, which the type checker refuses with the right form."""
        span = self._s(meta)
        if not args or len(args) > 2 or not isinstance(args[0], A.View) or args[0].edge:
            return A.Call(span, "edge", args)
        fill = args[1] if len(args) > 1 else None
        return replace(args[0], span=span, edge=True, fill=fill)

    def generic_call(self, meta, c):
        return A.Call(self._s(meta), self._callee(c[0]), c[2] or (), c[1])

    def method_call(self, meta, c):
        return A.MethodCall(self._s(meta), c[0], str(c[1]), c[2] or ())

    def index(self, meta, c):
        return A.Index(self._s(meta), c[0], c[1])

    def args(self, meta, c):
        return tuple(c)

    type_args = args

    def int_lit(self, meta, c):
        return A.IntLit(self._s(meta), _int(c[0], self.file))

    def float_lit(self, meta, c):
        value = float(str(c[0]).replace("_", ""))
        if not math.isfinite(value):
            raise _Invalid(f"float literal {_shown(c[0])} is out of range for f64", self._s(meta))
        return A.FloatLit(self._s(meta), value)

    def true_lit(self, meta, c):
        return A.BoolLit(self._s(meta), True)

    def false_lit(self, meta, c):
        return A.BoolLit(self._s(meta), False)

    def name(self, meta, c):
        return A.Name(self._s(meta), str(c[0]))

    def transfer(self, meta, c):
        return self._transfer(meta, c, False)

    def transfer_async(self, meta, c):
        return self._transfer(meta, c, True)

    def _transfer(self, meta, c, is_async: bool):
        """`Memory::X` names the destination space; anything else is a store's destination
        (a view of an output; the type checker says what else it may not be)."""
        if isinstance(c[1], A.MemPath):
            return A.Transfer(self._s(meta), c[0], c[1].name, is_async)
        return A.Transfer(self._s(meta), c[0], "", is_async, c[1])

    def view(self, meta, c):
        return A.View(self._s(meta), c[0], tuple(r for r in c[1:] if r is not None))

    def range(self, meta, c):
        return A.Range(self._s(meta), c[0], c[1])

    def wait(self, meta, c):
        return A.Wait(self._s(meta), c[0])

    def tensor_new(self, meta, c):
        return A.TensorNew(self._s(meta), c[0], c[1])

    def iota(self, meta, c):
        return A.Iota(self._s(meta), c[0], c[1], int(str(c[2]).replace("_", "")))


def _too_deep(tree: lark.Tree) -> lark.Tree | None:
    """The first node nested deeper than MAX_DEPTH, or None. Iterative, so a 10 000-deep
    expression cannot exhaust the stack; the node found lies inside the deep subtree
    (the diagnostic points there, not at whatever subtree comes first)."""
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return node
        stack.extend((ch, depth + 1) for ch in node.children if isinstance(ch, lark.Tree))
    return None


def _node_span(node: lark.Tree, file: str) -> Span:
    meta = node.meta
    return Span(file, getattr(meta, "line", 1), getattr(meta, "column", 1))


def decode(data: bytes, file: str, sink: DiagnosticSink) -> str | None:
    try:
        text = data.decode("utf-8")
        return text[1:] if text.startswith("\ufeff") else text  # a BOM is not source (rustc)
    except UnicodeDecodeError as e:
        prefix = data[: e.start]
        line = prefix.count(b"\n") + 1
        column = len(prefix[prefix.rfind(b"\n") + 1 :].decode("utf-8", "replace")) + 1
        sink.emit(
            "E0001",
            f"source is not valid UTF-8 (byte 0x{data[e.start]:02x})",
            Span(file, line, column, line, column + 1),
            help="save the file as UTF-8",
        )
        return None


# Terminators come first in "expected one of": the list is cut at 8, and a missing `;`
# (the most common slip) was otherwise hidden behind `,`, `.`, `{`, `<`, ...
FIRST_EXPECTED = ("SEMICOLON", "RPAR", "RSQB", "RBRACE", "COMMA")


def _expected(exc: lark.exceptions.UnexpectedInput) -> str:
    names = sorted(
        getattr(exc, "expected", None) or getattr(exc, "allowed", None) or [],
        key=lambda n: (
            FIRST_EXPECTED.index(n) if n in FIRST_EXPECTED else len(FIRST_EXPECTED),
            n[1:] if n in keyword_terminals() else n,
        ),
    )
    shown = [_pretty_terminal(n) for n in names][:8]
    return ", ".join(shown) + (", ..." if len(names) > 8 else "")


def _pretty_terminal(name: str) -> str:
    if name in keyword_terminals():
        return f"`{keyword_terminals()[name]}`"
    try:
        pattern = _lark().get_terminal(name).pattern
    except KeyError:
        return name
    if pattern.type == "str":
        return f"`{pattern.value}`"
    return {
        "NAME": "a name",
        "INT": "an integer",
        "FLOAT": "a float",
        "UNIT": "a size unit",
        "CMP_OP": "a comparison",
        "ADD_OP": "`+`/`-`",
        "MUL_OP": "`*`/`/`/`%`",
        "RATE": "a rate",
        "MUT": "`mut`",
        "EDGE_KIND": "`relaxed`/`sync`",
    }.get(name, name)


# `stage<8192>(...)`: the const-argument call form of the Vx design documents. In an
# expression it is two comparisons, and no LALR(1) grammar can take both readings
# (`f(a < b, c > (d))` is ambiguous); as in Rust, calls write `stage::<8192>(...)`.
_ANGLE_CALL = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*<([^<>;{}=&|!\[\]]*)>\s*\(")
_TYPE_WORDS = frozenset({"Tensor", "Vec", "Token"})


def _turbofish(text: str, tok: Token, file: str, sink: DiagnosticSink) -> bool:
    """A syntax error inside `name<args>(`: say how to write const arguments. Whether
    one was emitted."""
    if tok.type == "$END":
        return False
    start = text.rfind("\n", 0, tok.start_pos) + 1
    end = text.find("\n", tok.start_pos)
    line = text[start : end if end >= 0 else len(text)]
    at = tok.start_pos - start
    for m in reversed(list(_ANGLE_CALL.finditer(line))):
        name, args = m.group(1), " ".join(m.group(2).split())
        if m.start(2) <= at and name not in KEYWORDS | _TYPE_WORDS and args:
            lt = line.index("<", m.end(1))
            sink.emit(
                "E0002",
                f"`{name}<{args}>(...)` is parsed as chained comparisons",
                Span(file, tok.line, lt + 1, tok.line, line.index(">", m.start(2)) + 2),
                notes=[
                    "a call's const arguments need `::` before `<`: "
                    "`f(a < b, c > (d))` would otherwise be ambiguous"
                ],
                help=f"write `{name}::<{args}>(...)`",
            )
            return True
    return False


def parse(text: str, file: str, sink: DiagnosticSink) -> A.Module | None:
    with collector.paused():  # its objects are acyclic and live on (vxc/collector.py)
        return _parse(text, file, sink)


def _parse(text: str, file: str, sink: DiagnosticSink) -> A.Module | None:
    """Parse one file. Returns None (with one diagnostic in `sink`) on a syntax error."""
    try:
        tree = _lark().parse(text)
    except _Keyword as e:
        sink.emit(
            "E0002",
            f"`{e.tok}` is a keyword and cannot be used as a name",
            _tok_span(e.tok, file),
            help=f"rename it (for example `{e.tok}_`)",
        )
        return None
    except lark.exceptions.UnexpectedCharacters as e:
        span = Span(file, e.line, e.column, e.line, e.column + 1)
        if text.startswith("/*", e.pos_in_stream):
            sink.emit(
                "E0003",
                "unterminated block comment",
                span,
                help="close the comment with `*/` (block comments do not nest)",
            )
        else:
            sink.emit(
                "E0002",
                f"unexpected character {text[e.pos_in_stream]!r}",
                span,
                notes=[f"expected one of: {_expected(e)}"] if _expected(e) else [],
            )
        return None
    except lark.exceptions.UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            line = text.count("\n") + 1
            column = len(text) - (text.rfind("\n") + 1) + 1
            span, what = Span(file, line, column), "end of file"
        else:
            span, what = _tok_span(tok, file), f"`{tok}`"
            if text.startswith("/*", tok.start_pos):
                sink.emit(
                    "E0003",
                    "unterminated block comment",
                    span,
                    help="close the comment with `*/` (block comments do not nest)",
                )
                return None
        if _turbofish(text, tok, file, sink):
            return None
        sink.emit("E0002", f"unexpected {what}", span, notes=[f"expected one of: {_expected(e)}"])
        return None
    except lark.exceptions.UnexpectedEOF as e:  # pragma: no cover - LALR reports UnexpectedToken
        sink.emit(
            "E0002",
            "unexpected end of file",
            Span(file, 1, 1),
            notes=[f"expected one of: {_expected(e)}"],
        )
        return None
    deep = _too_deep(tree)
    if deep is not None:
        sink.emit(
            "E0004",
            f"expression or block nests deeper than {MAX_DEPTH} levels",
            _node_span(deep, file),
            help="split it with `let` bindings",
        )
        return None
    try:
        return _ToAst(file).transform(tree)
    except lark.exceptions.VisitError as e:
        if isinstance(e.orig_exc, _Invalid):
            sink.emit("E0005", str(e.orig_exc), e.orig_exc.span)
            return None
        raise


def parse_source(data: bytes, file: str, sink: DiagnosticSink) -> A.Module | None:
    text = decode(data, file, sink)
    return None if text is None else parse(text, file, sink)

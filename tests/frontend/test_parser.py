"""Parser unit tests: every declaration, statement and expression form of LANGUAGE.md,
size literals with units and rates, spans, and syntax errors as diagnostics."""

from __future__ import annotations

import pytest

from vxc.diagnostics import DiagnosticSink
from vxc.frontend import ast as A
from vxc.frontend.parser import MAX_DEPTH, UNITS, parse_source


def parse_ok(src: str) -> A.Module:
    sink = DiagnosticSink()
    mod = parse_source(src.encode(), "t.vx", sink)
    assert sink.items == [], [(d.code, d.message) for d in sink.items]
    assert mod is not None
    return mod


def parse_err(src: str | bytes):
    sink = DiagnosticSink()
    data = src if isinstance(src, bytes) else src.encode()
    mod = parse_source(data, "t.vx", sink)
    assert mod is None
    assert len(sink.items) == 1, sink.items
    return sink.items[0]


def body(src: str) -> list[A.Stmt]:
    """The statements of `fn f() { src }`."""
    (fn,) = parse_ok(f"fn f() {{ {src} }}").items
    return fn.body.stmts


def expr(src: str) -> A.Expr:
    (stmt,) = body(f"let x = {src};")
    return stmt.value


def sexpr(e) -> str:
    """A compact, fully parenthesised rendering, for precedence tables."""
    match e:
        case A.IntLit() | A.FloatLit() | A.SizeLit():
            return str(e.value)
        case A.BoolLit():
            return "true" if e.value else "false"
        case A.Name():
            return e.name
        case A.MemPath():
            return f"Memory::{e.name}"
        case A.TopoPath():
            return f"Topology::{e.name}"
        case A.Unary():
            return f"({e.op} {sexpr(e.operand)})"
        case A.Binary():
            return f"({e.op} {sexpr(e.lhs)} {sexpr(e.rhs)})"
        case A.Borrow():
            return f"({'&mut' if e.mutable else '&'} {sexpr(e.operand)})"
        case A.Call():
            const = "" if e.const_args is None else f"::<{' '.join(map(sexpr, e.const_args))}>"
            return f"(call {e.callee}{const} {' '.join(map(sexpr, e.args))})".replace(" )", ")")
        case A.MethodCall():
            return f"(. {sexpr(e.obj)} {e.method} {' '.join(map(sexpr, e.args))})".replace(
                " )", ")"
            )
        case A.Index():
            return f"([] {sexpr(e.obj)} {sexpr(e.index)})"
        case A.Transfer():
            kind = "transfer_async" if e.is_async else "transfer"
            return f"({kind} {sexpr(e.src)} {e.space})"
        case A.Wait():
            return f"(wait {sexpr(e.token)})"
        case A.TensorNew():
            return f"(new {e.elem.name} {list(e.dims)})"
    raise AssertionError(type(e))


# ---- lexical -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("42", 42),
        ("1_000", 1000),
        ("1_000_000", 1_000_000),
        ("9223372036854775807", (1 << 63) - 1),
    ],
)
def test_integer_literals(text, value):
    e = expr(text)
    assert isinstance(e, A.IntLit) and e.value == value


@pytest.mark.parametrize(
    ("text", "value"),
    [("0.5", 0.5), ("1e-3", 1e-3), ("2.5e2", 250.0), ("1E3", 1000.0), ("1_0.2_5", 10.25)],
)
def test_float_literals(text, value):
    e = expr(text)
    assert isinstance(e, A.FloatLit) and e.value == pytest.approx(value)


def test_integer_literal_that_does_not_fit_is_E0005():
    d = parse_err("fn f() {\n  let x = 9223372036854775808;\n}")
    assert (d.code, d.span.line, d.span.column) == ("E0005", 2, 11)
    assert "does not fit in 64 bits" in d.message


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_size_literal_units_are_binary(unit):
    want = {"B": 1, "KB": 2**10, "MB": 2**20, "GB": 2**30, "TB": 2**40}[unit.replace("i", "")]
    e = expr(f"3 {unit}")
    assert isinstance(e, A.SizeLit) and e.value == 3 * want


def test_size_literal_without_space_and_spec_example():
    assert expr("64MB").value == expr("64 MB").value == 67108864
    assert expr("128 MiB").value == 134217728


@pytest.mark.parametrize(
    ("text", "value", "per"),
    [
        ("8 TB/s", 8 * 2**40, "s"),
        ("819 GB/s", 819 * 2**30, "s"),
        ("128 B/cyc", 128, "cyc"),
        ("3.35 TB/s", int(3.35 * 2**40), "s"),
        ("1 KiB/cyc", 1024, "cyc"),
    ],
)
def test_rates_in_memory_facets(text, value, per):
    (mem,) = parse_ok(f"Memory M {{ bandwidth: {text} }}").items
    (facet,) = mem.facets
    assert (facet.name, facet.kind, facet.value, facet.unit) == ("bandwidth", "rate", value, per)


def test_unit_names_are_identifiers_outside_size_literals():
    stmts = body("let B = 1; let KB = B; let GiB = KB;")
    assert [s.name for s in stmts] == ["B", "KB", "GiB"]
    assert isinstance(stmts[1].value, A.Name) and stmts[1].value.name == "B"


@pytest.mark.parametrize(
    "src",
    [
        "let x = 1.5 KB;",  # sizes are whole numbers
        "let x = 5 KB/s;",  # rates only in machine facets
        "let x = 0x10;",  # no hex literals
    ],
)
def test_malformed_numeric_forms_are_syntax_errors(src):
    d = parse_err(f"fn f() {{ {src} }}")
    assert d.code == "E0002"


def test_line_and_block_comments_are_ignored():
    mod = parse_ok(
        "// leading\n/* block\n spanning lines */ fn f() { // trailing\n"
        "  let x /* inline */ = 1; }\n// end"
    )
    (fn,) = mod.items
    assert fn.name == "f" and fn.body.stmts[0].span.line == 4


def test_block_comments_do_not_nest():
    d = parse_err("/* a /* b */ c */ fn f() {}")
    assert (d.code, d.message, d.span.column) == ("E0002", "unexpected `c`", 14)


@pytest.mark.parametrize(
    ("src", "line", "column"),
    [
        ("fn f() { /* never closed", 1, 10),
        ("fn f() {}\n\n  /* open\n at end", 3, 3),
        ("/*", 1, 1),
    ],
)
def test_unterminated_block_comment_is_E0003(src, line, column):
    d = parse_err(src)
    assert (d.code, d.span.line, d.span.column) == ("E0003", line, column)
    assert d.help == "close the comment with `*/` (block comments do not nest)"


@pytest.mark.parametrize(
    "word",
    [
        "fn",
        "let",
        "mut",
        "for",
        "in",
        "if",
        "else",
        "return",
        "on",
        "spawn",
        "where",
        "const",
        "Memory",
        "Topology",
        "transfer",
        "relaxed",
        "sync",
        "true",
        "false",
        "extern",
        "transfer_async",
        "wait",
    ],
)
def test_keywords_cannot_be_bound_as_names(word):
    """LANGUAGE.md section 1: keywords (and the two P0-2 intrinsics) are not identifiers."""
    forms = [
        f"fn {word}() {{}}",
        f"fn f({word}: i32) {{}}",
        f"fn f() {{ for {word} in 0..1 {{}} }}",
    ]
    if word != "mut":  # `let mut = 1;` is `let mut` missing its name
        forms.append(f"fn f() {{ let {word} = 1; }}")
    for src in forms:
        d = parse_err(src)
        assert d.code == "E0002", src
        assert f"`{word}`" in d.message, (src, d.message)


# ---- machine declarations ------------------------------------------------------------
def test_memory_declaration_every_facet_kind():
    (mem,) = parse_ok(
        "Memory VMEM { within: Memory::HBM, capacity: 128 MB, granule: 4 KB,\n"
        "  bandwidth: 819 GB/s, managed: explicit, scope: sm, slots: 4, }"
    ).items
    assert isinstance(mem, A.MemoryDecl) and mem.name == "VMEM"
    got = [(f.name, f.kind, f.value, f.unit) for f in mem.facets]
    assert got == [
        ("within", "memory", "HBM", ""),
        ("capacity", "size", 128 * 2**20, ""),
        ("granule", "size", 4096, ""),
        ("bandwidth", "rate", 819 * 2**30, "s"),
        ("managed", "word", "explicit", ""),
        ("scope", "word", "sm", ""),
        ("slots", "int", 4, ""),
    ]


def test_empty_memory_declaration():
    (mem,) = parse_ok("Memory M {}").items
    assert mem.name == "M" and mem.facets == ()


def test_topology_declaration_facets_and_edges():
    (topo,) = parse_ok(
        "Topology TensorCore {\n"
        "  memory: Memory::VMEM,\n"
        "  visible: [Memory::VMEM, Memory::HBM],\n"
        "  transfer Memory::HBM -> Memory::VMEM : 50,\n"
        "  transfer Memory::VMEM -> Memory::HBM : 50 sync,\n"
        "  transfer Memory::HBM -> Memory::CMEM : 40 relaxed\n"
        "}"
    ).items
    assert isinstance(topo, A.TopologyDecl) and topo.name == "TensorCore"
    assert [(f.name, f.kind, f.value) for f in topo.facets] == [
        ("memory", "memory", "VMEM"),
        ("visible", "list", ("VMEM", "HBM")),
    ]
    assert [(e.src, e.dst, e.cost, e.relaxed) for e in topo.edges] == [
        ("HBM", "VMEM", 50, False),
        ("VMEM", "HBM", 50, False),
        ("HBM", "CMEM", 40, True),
    ]
    assert [e.span.line for e in topo.edges] == [4, 5, 6]


def test_topology_facet_can_name_a_topology_and_an_empty_list():
    (topo,) = parse_ok("Topology T { parent: Topology::U, visible: [] }").items
    assert [(f.kind, f.value) for f in topo.facets] == [("topology", "U"), ("list", ())]


# ---- functions ---------------------------------------------------------------------------
def test_function_with_generics_params_return_placement_and_where():
    (fn,) = parse_ok(
        "fn name<const N: i32, const M: i64>(p: Tensor<f32, [N, 4]>, q: &Vec<Tensor<bf16, [M]>>,"
        " r: &mut Tensor<f32, [2, 2]>, n: i64,) -> Tensor<f32, [N, 4]> on Topology::TensorCore"
        " where n <= 512, N > 0 { }"
    ).items
    assert isinstance(fn, A.FnDecl) and fn.name == "name" and fn.body.stmts == ()
    assert [(c.name, c.type.name) for c in fn.const_params] == [("N", "i32"), ("M", "i64")]
    assert [p.name for p in fn.params] == ["p", "q", "r", "n"]
    p, q, r, n = (p.type for p in fn.params)
    assert isinstance(p, A.TensorType) and p.elem.name == "f32" and p.dims == ("N", 4)
    assert isinstance(q, A.RefType) and not q.mutable and isinstance(q.inner, A.VecType)
    assert q.inner.elem.dims == ("M",) and q.inner.elem.elem.name == "bf16"
    assert isinstance(r, A.RefType) and r.mutable and r.inner.dims == (2, 2)
    assert isinstance(n, A.NamedType) and n.name == "i64"
    assert isinstance(fn.ret, A.TensorType) and fn.ret.dims == ("N", 4)
    assert fn.topology == "TensorCore"
    assert [sexpr(w) for w in fn.where] == ["(<= n 512)", "(> N 0)"]


def test_minimal_function_is_host_void():
    (fn,) = parse_ok("fn f() {}").items
    assert (fn.const_params, fn.params, fn.ret, fn.topology, fn.where) == ((), (), None, None, ())


def test_extern_function_has_no_body():
    (fn,) = parse_ok(
        "extern fn matmul_acc(t: Tensor<f32, [128, 128]>) -> void on Topology::TensorCore;"
    ).items
    assert fn.body is None and fn.name == "matmul_acc" and fn.ret.name == "void"
    assert fn.topology == "TensorCore" and fn.where == ()


def test_token_type():
    (fn,) = parse_ok("fn f(t: Token<Tensor<f32, [128, 128]>, Memory::VMEM>) {}").items
    ty = fn.params[0].type
    assert isinstance(ty, A.TokenType) and ty.space == "VMEM" and ty.inner.dims == (128, 128)


def test_several_items_in_order():
    mod = parse_ok("Memory A {}\nTopology T {}\nextern fn g();\nfn f() {}")
    assert [type(i).__name__ for i in mod.items] == [
        "MemoryDecl",
        "TopologyDecl",
        "FnDecl",
        "FnDecl",
    ]


def test_empty_and_comment_only_sources_are_empty_modules():
    assert parse_ok("").items == ()
    assert parse_ok("  \n// nothing\n/* here */\n").items == ()


# ---- statements ----------------------------------------------------------------------------
def test_let_forms():
    a, b, c = body("let x = 1; let mut y = 2; let z: i64 = 3;")
    assert (a.name, a.mutable, a.declared) == ("x", False, None)
    assert (b.name, b.mutable) == ("y", True)
    assert (c.name, c.declared.name, c.value.value) == ("z", "i64", 3)


def test_assign_expr_and_return_statements():
    a, e, r1 = body("x = y + 1; g(x); return x;")
    assert isinstance(a, A.Assign) and a.name == "x" and sexpr(a.value) == "(+ y 1)"
    assert isinstance(e, A.ExprStmt) and sexpr(e.expr) == "(call g x)"
    assert isinstance(r1, A.Return) and sexpr(r1.value) == "x"
    (r2,) = body("return;")
    assert isinstance(r2, A.Return) and r2.value is None


def test_for_loop_is_a_half_open_range():
    (s,) = body("for i in 1..tiles.len() { g(i); }")
    assert isinstance(s, A.For) and s.var == "i"
    assert (sexpr(s.start), sexpr(s.end)) == ("1", "(. tiles len)")
    assert len(s.body.stmts) == 1


def test_if_without_else_with_else_and_else_if_chain():
    s1, s2, s3 = body(
        "if a { g(); } if a { } else { h(); } if a { } else if b { g(); } else { h(); }"
    )
    assert s1.orelse is None and len(s1.then.stmts) == 1
    assert len(s2.orelse.stmts) == 1
    (inner,) = s3.orelse.stmts  # `else if` is an else block holding one if
    assert isinstance(inner, A.If) and sexpr(inner.cond) == "b"
    assert isinstance(inner.orelse.stmts[0], A.ExprStmt)


def test_spawn_and_assert():
    (s,) = body("spawn on(Topology::Vector) { assert(buf == 7); }")
    assert isinstance(s, A.Spawn) and s.topology == "Vector"
    (stmt,) = s.body.stmts
    assert sexpr(stmt.expr) == "(call assert (== buf 7))"


def test_nested_blocks():
    (s,) = body("for i in 0..4 { for j in 0..i { if j == 1 { return; } } }")
    (inner,) = s.body.stmts
    (branch,) = inner.body.stmts
    assert isinstance(branch.then.stmts[0], A.Return)


# ---- expressions ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("src", "tree"),
    [
        ("1 + 2 * 3", "(+ 1 (* 2 3))"),
        ("1 * 2 + 3", "(+ (* 1 2) 3)"),
        ("1 - 2 - 3", "(- (- 1 2) 3)"),
        ("8 / 4 % 3", "(% (/ 8 4) 3)"),
        ("(1 + 2) * 3", "(* (+ 1 2) 3)"),
        ("-a * b", "(* (- a) b)"),
        ("- -a", "(- (- a))"),
        ("!a && b", "(&& (! a) b)"),
        ("a || b && c", "(|| a (&& b c))"),
        ("a && b || c", "(|| (&& a b) c)"),
        ("a + 1 < b * 2", "(< (+ a 1) (* b 2))"),
        ("a == b && c != d", "(&& (== a b) (!= c d))"),
        ("a <= b || c >= d", "(|| (<= a b) (>= c d))"),
        ("a > b", "(> a b)"),
        ("&x", "(& x)"),
        ("&mut x", "(&mut x)"),
        ("&tiles[i]", "(& ([] tiles i))"),
        ("f(a, b + 1)", "(call f a (+ b 1))"),
        ("f()", "(call f)"),
        ("f(a,)", "(call f a)"),
        ("f::<128>(x)", "(call f::<128> x)"),
        ("f::<128, 4>(x, y)", "(call f::<128 4> x y)"),
        ("f::<2>()", "(call f::<2>)"),
        ("v.len()", "(. v len)"),
        ("v.len() - 1", "(- (. v len) 1)"),
        ("v[i + 1]", "([] v (+ i 1))"),
        ("v[0][1]", "([] ([] v 0) 1)"),
        ("transfer(t, Memory::VMEM)", "(transfer t VMEM)"),
        ("transfer_async(tiles[0], Memory::VMEM)", "(transfer_async ([] tiles 0) VMEM)"),
        ("wait(inflight)", "(wait inflight)"),
        ("wait(transfer_async(t, Memory::X))", "(wait (transfer_async t X))"),
        ("Tensor<f32>([128, 128])", "(new f32 [128, 128])"),
        ("Tensor<bf16>([N, 4])", "(new bf16 ['N', 4])"),
        ("Memory::HBM", "Memory::HBM"),
        ("Topology::TensorCore", "Topology::TensorCore"),
        ("true", "true"),
        ("false", "false"),
        ("((((a))))", "a"),
    ],
)
def test_expression_forms_and_precedence(src, tree):
    assert sexpr(expr(src)) == tree


def test_comparisons_do_not_chain():
    d = parse_err("fn f() { let x = 1 < 2 < 3; }")
    assert (d.code, d.message, d.span.column) == ("E0002", "unexpected `<`", 24)


def test_only_named_functions_are_called():
    d = parse_err("fn f() { let x = v.len()(1); }")
    assert d.code == "E0005" and d.message == "only named functions can be called"


def test_parenthesised_callee_is_a_named_call():
    assert sexpr(expr("(g)(1)")) == "(call g 1)"


# ---- spans -------------------------------------------------------------------------------------
def test_let_span_is_the_bound_name():
    (fn,) = parse_ok("fn f() {\n  let mut inflight = 1;\n}").items
    (s,) = fn.body.stmts
    assert (s.span.line, s.span.column, s.span.end_line, s.span.end_column) == (2, 11, 2, 19)


def test_function_name_span_and_item_span():
    (fn,) = parse_ok("\n\nfn  stream() {\n}\n").items
    assert (fn.name_span.line, fn.name_span.column, fn.name_span.end_column) == (3, 5, 11)
    assert (fn.span.line, fn.span.column, fn.span.end_line) == (3, 1, 4)


def test_expression_spans_cover_their_text():
    src = "fn f() {\n  g(a + bb, wait(tok));\n}"
    (fn,) = parse_ok(src).items
    call = fn.body.stmts[0].expr
    line = src.splitlines()[1]

    def text(node):
        s = node.span
        assert s.line == s.end_line == 2
        return line[s.column - 1 : s.end_column - 1]

    assert text(call) == "g(a + bb, wait(tok))"
    assert text(call.args[0]) == "a + bb"
    assert text(call.args[0].rhs) == "bb"
    assert text(call.args[1]) == "wait(tok)"
    assert text(call.args[1].token) == "tok"


def test_multiline_spans():
    (fn,) = parse_ok("fn f() {\n  if c {\n    g();\n  }\n}").items
    (s,) = fn.body.stmts
    assert (s.span.line, s.span.column, s.span.end_line) == (2, 3, 4)
    assert (fn.body.span.line, fn.body.span.end_line) == (1, 5)


def test_edge_and_facet_spans():
    (topo,) = parse_ok(
        "Topology T {\n  memory: Memory::A,\n    transfer Memory::A -> Memory::B : 1\n}"
    ).items
    assert (topo.facets[0].span.line, topo.facets[0].span.column) == (2, 3)
    assert (topo.edges[0].span.line, topo.edges[0].span.column) == (3, 5)


def test_tabs_and_crlf_line_endings():
    (fn,) = parse_ok("fn f() {\r\n\tlet x = 1;\r\n}\r\n").items
    (s,) = fn.body.stmts
    assert (s.span.line, s.span.column) == (2, 6)


# ---- syntax errors ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("src", "code", "line", "column", "message"),
    [
        ("fn f() { let x = 1 }", "E0002", 1, 20, "unexpected `}`"),
        ("fn f() {\n  let x = 1;\n", "E0002", 3, 1, "unexpected end of file"),
        ("fn f() { let x = @; }", "E0002", 1, 18, "unexpected character '@'"),
        ("fn f() { let x = 1; } }", "E0002", 1, 23, "unexpected `}`"),
        ("fn f( { }", "E0002", 1, 7, "unexpected `{`"),
        ("fn f() -> { }", "E0002", 1, 11, "unexpected `{`"),
        ("let x = 1;", "E0002", 1, 1, "unexpected `let`"),
        ("fn f() { for i in 0 { } }", "E0002", 1, 21, "unexpected `{`"),
        ("fn f() { x.y; }", "E0002", 1, 13, "unexpected `;`"),
        ("fn f() { if a b }", "E0002", 1, 15, "unexpected `b`"),
        ("Memory M { capacity 4 }", "E0002", 1, 21, "unexpected `4`"),
        ("Topology T { transfer Memory::A -> Memory::B }", "E0002", 1, 46, "unexpected `}`"),
        ("fn f() { transfer_async(t); }", "E0002", 1, 26, "unexpected `)`"),
        ("fn f() { let x = transfer_async; }", "E0002", 1, 32, "unexpected `;`"),
        ("fn f() { wait(a, b); }", "E0002", 1, 16, "unexpected `,`"),
        ("extern fn g() { }", "E0002", 1, 15, "unexpected `{`"),
        ("fn f() { let x = 1;\n  $ }", "E0002", 2, 3, "unexpected character '$'"),
    ],
)
def test_syntax_errors(src, code, line, column, message):
    d = parse_err(src)
    assert (d.code, d.span.line, d.span.column, d.message) == (code, line, column, message)
    assert d.span.file == "t.vx"
    if code == "E0002" and "end of file" not in message:
        assert d.notes and d.notes[0].startswith("expected one of: ")


def test_let_mut_without_a_name():
    d = parse_err("fn f() { let mut = 1; }")
    assert (d.code, d.message, d.notes) == ("E0002", "unexpected `=`", ["expected one of: a name"])


# ---- bad bytes and deep nesting -----------------------------------------------------------------
def test_non_utf8_is_E0001_at_the_bad_byte():
    d = parse_err(b"fn f() {\n  let \xc3\xa9x = 1; \xff\n}")
    assert (d.code, d.span.line, d.span.column) == ("E0001", 2, 15)
    assert d.message == "source is not valid UTF-8 (byte 0xff)"


def test_utf8_outside_identifiers_is_a_syntax_error_not_a_crash():
    d = parse_err("fn f() { let é = 1; }")
    assert d.code == "E0002" and d.span.column == 14


@pytest.mark.parametrize("depth", [MAX_DEPTH // 4, MAX_DEPTH // 3])
def test_nesting_within_the_limit_parses(depth):
    e = expr("(" * depth + "1" + ")" * depth)
    assert isinstance(e, A.IntLit)
    e = expr("-" * depth + "1")
    for _ in range(depth):
        e = e.operand
    assert isinstance(e, A.IntLit)


def test_ten_thousand_parentheses_parse_flat():
    """Parentheses leave no node behind, so 10 000 of them are one literal, not a deep tree."""
    e = expr("(" * 10_000 + "1" + ")" * 10_000)
    assert isinstance(e, A.IntLit) and e.value == 1


@pytest.mark.parametrize(
    "inner",
    [
        "(" * 5_000 + "-" * 5_000 + "1" + ")" * 5_000,
        "-" * 10_000 + "1",
        "!" * 10_000 + "true",
        "&" * 5_000 + "x",
        "1" + " + 1" * 10_000,
        "f(" * 2_000 + ")" * 2_000,
    ],
    ids=["parens-neg", "neg", "not", "borrow", "sum", "calls"],
)
def test_deep_nesting_is_E0004_not_a_recursion_error(inner):
    d = parse_err(f"fn f() {{\n  let x = {inner};\n}}")
    assert d.code == "E0004" and d.span.line == 2
    assert d.help == "split it with `let` bindings"


def test_deeply_nested_blocks_are_E0004():
    d = parse_err("fn f() " + "{ if a " * 400 + "{}" + " }" * 400)
    assert d.code == "E0004"


def test_leading_utf8_bom_is_skipped():
    mod = parse_ok("\ufefffn f() {}")
    (fn,) = mod.items
    assert (fn.name_span.line, fn.name_span.column) == (1, 4)
    d = parse_err("fn f() {}\ufeff")  # only a leading BOM is skipped
    assert d.code == "E0002"


def test_e0004_points_into_the_deep_expression_not_the_first_subtree():
    d = parse_err("fn f(a: i32) -> i32 {\n  let y = 1;\n  return " + "-" * 300 + "a;\n}")
    assert d.code == "E0004"
    assert d.span.line == 3 and d.span.column > 9


def test_missing_semicolon_is_named_first_in_the_expected_list():
    d = parse_err("fn f() {\n  let x = 1\n  let y = 2;\n}")
    assert (d.code, d.message, d.span.line) == ("E0002", "unexpected `let`", 3)
    assert d.notes[0].startswith("expected one of: `;`, ")

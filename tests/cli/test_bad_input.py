"""Issue 2's bad input: any bytes given to `vxc check` end in exit 0 or exit 1 with a
diagnostic, never a traceback, a RecursionError or a hang. Each run is a subprocess
with a time limit (the limit is the "no hang" assertion)."""

from __future__ import annotations

import random

import pytest
from clirun import assert_no_crash, run_vxc

NEST = 10_000


def check(path, timeout=120, *flags):
    r = run_vxc("check", *flags, str(path), timeout=timeout)
    assert_no_crash(r)
    assert r.rc in (0, 1), (r.rc, r.err[-2000:])
    if r.rc == 1:
        assert "error[E" in r.err
    return r


@pytest.mark.parametrize(
    ("name", "content", "rc", "head"),
    [
        ("empty", b"", 0, None),
        ("whitespace", b"  \n\t\r\n", 0, None),
        ("comment only", b"// nothing here\n/* nor here */\n", 0, None),
        (
            "non-UTF-8 byte",
            b"fn f() {\n  let x = 1; \xff\n}\n",
            1,
            "error[E0001]: source is not valid UTF-8 (byte 0xff)\n  --> {path}:2:14\n",
        ),
        (
            "truncated UTF-8 sequence",
            b"fn f() {} \xe2\x82",
            1,
            "error[E0001]: source is not valid UTF-8 (byte 0xe2)\n  --> {path}:1:11\n",
        ),
        (
            "latin-1 text",
            "fn f() { let caf\u00e9 = 1; }".encode("latin-1"),
            1,
            "error[E0001]: source is not valid UTF-8 (byte 0xe9)\n  --> {path}:1:17\n",
        ),
        (
            "unterminated block comment",
            b"fn f() {\n  /* never closed\n}\n",
            1,
            "error[E0003]: unterminated block comment\n  --> {path}:2:3\n",
        ),
        (
            "unterminated block comment at start",
            b"/*",
            1,
            "error[E0003]: unterminated block comment\n  --> {path}:1:1\n",
        ),
        ("NUL byte", b"fn f() {\x00}", 1, "error[E0002]: unexpected character '\\x00'\n"),
        ("lone closing brace", b"}", 1, "error[E0002]: unexpected `}`\n"),
        ("only an operator", b"+", 1, "error[E0002]: unexpected "),
    ],
)
def test_small_bad_inputs(write, name, content, rc, head):
    path = write("in.vx", content)
    r = check(path)
    assert r.rc == rc
    if head is None:
        assert r.err == ""
    else:
        assert r.err.startswith(head.replace("{path}", str(path)))


def test_utf8_bom_is_accepted_like_rustc(write):
    """A leading UTF-8 byte-order mark is not part of the program (rustc skips it)."""
    path = write("bom.vx", b"\xef\xbb\xbffn f() {}\n")
    r = check(path)
    assert (r.rc, r.err) == (0, "")


def test_ten_thousand_nested_parentheses(write):
    path = write("parens.vx", "fn f() {\n  let x = " + "(" * NEST + "1" + ")" * NEST + ";\n}\n")
    r = check(path)
    assert (r.rc, r.err) == (0, "")


def test_ten_thousand_unclosed_parentheses(write):
    path = write("open.vx", "fn f() {\n  let x = " + "(" * NEST + "1;\n}\n")
    r = check(path)
    assert r.rc == 1 and r.err.startswith("error[E0002]: unexpected `;`\n")


@pytest.mark.parametrize("op", ["-", "!", "&", "&mut "])
def test_deep_unary_nesting(write, op):
    path = write("unary.vx", "fn f() {\n  let x = " + op * NEST + "1;\n}\n")
    r = check(path)
    assert r.rc == 1
    assert r.err.startswith("error[E0004]: expression or block nests deeper than 200 levels\n")
    assert f"--> {path}:2:" in r.err


def test_deep_binary_chain(write):
    path = write("chain.vx", "fn f() {\n  let x = 1" + " + 1" * NEST + ";\n}\n")
    r = check(path)
    assert r.rc == 1 and r.err.startswith("error[E0004]: ")


def test_deep_block_nesting(write):
    path = write("blocks.vx", "fn f(a: bool) " + "{ if a " * 2000 + "{}" + " }" * 2000 + "\n")
    r = check(path)
    assert r.rc == 1 and r.err.startswith("error[E0004]: ")


def test_deep_call_nesting(write):
    src = "fn g(x: i32) -> i32 { return x; }\nfn f() { " + "g(" * 3000 + "1" + ")" * 3000 + "; }\n"
    path = write("calls.vx", src)
    r = check(path)
    assert r.rc == 1 and r.err.startswith("error[E0004]: ")


def test_very_long_line(write):
    path = write("long.vx", "fn f() { " + "let x = 1; " * 20_000 + "}\n")
    r = check(path)
    assert (r.rc, r.err) == (0, "")


@pytest.mark.parametrize("seed", range(4))
def test_random_bytes(write, seed):
    path = write("rnd.vx", random.Random(seed).randbytes(8192))
    r = check(path)
    assert r.rc == 1


@pytest.mark.parametrize("seed", range(4))
def test_random_token_soup(write, seed):
    alphabet = list("fn let mut ( ) { } [ ] < > ; : , . = + - * / & ! | 0 1 x") + [
        "Memory::",
        "Topology::",
        "transfer_async",
        "wait",
        "\n",
        " ",
        "/*",
        "*/",
        "//",
        "KB",
    ]
    rng = random.Random(seed)
    path = write("soup.vx", "".join(rng.choice(alphabet) for _ in range(20_000)))
    check(path)


def _ten_mb(unit: str) -> str:
    return unit * (10 * 1024 * 1024 // len(unit) + 1)


@pytest.mark.slow
def test_ten_megabytes_of_comment(write):
    path = write("comment.vx", "// " + "x" * (10 * 1024 * 1024) + "\n")
    r = check(path)
    assert (r.rc, r.err) == (0, "")


@pytest.mark.slow
def test_ten_megabytes_of_random_bytes(write):
    path = write("noise.vx", random.Random(10).randbytes(10 * 1024 * 1024))
    r = check(path)
    assert r.rc == 1 and r.err.startswith("error[E0001]: ")


@pytest.mark.slow
def test_ten_megabytes_with_a_syntax_error_at_the_end(write):
    fn = "fn f(a: i64, b: i64) -> i64 {\n  let c = a + b * 2;\n  return c - 1;\n}\n"
    text = _ten_mb(fn) + "fn oops( {\n"
    path = write("tail.vx", text)
    r = check(path, timeout=600)
    assert r.rc == 1
    assert r.err.startswith("error[E0002]: unexpected `{`\n")
    assert f"--> {path}:{text.count(chr(10))}:10\n" in r.err


@pytest.mark.slow
def test_ten_megabytes_of_valid_functions(write):
    """About 140 000 distinct functions (560 000 lines): a clean program, checked to the end."""
    parts, size, i = [], 0, 0
    while size < 10 * 1024 * 1024:
        s = f"fn f{i}(a: i64, b: i64) -> i64 {{\n  let c = a + b * 2;\n  return c - 1;\n}}\n"
        parts.append(s)
        size += len(s)
        i += 1
    path = write("valid.vx", "".join(parts))
    # The front half and the checks at this size; the CPU lowering of 140 000 functions
    # is a build's cost (a plain `vxc check` lowers too), not what this test measures.
    r = check(path, 600, "--no-lower")
    assert (r.rc, r.err) == (0, "")

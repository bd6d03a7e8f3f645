"""Every diagnostic code the compiler can emit, defined once.

The CLI's `vxc explain`, the docs (docs/CODES.md) and the emitters all read this
table; emitting a code that is not here is a bug caught by the tests.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Code:
    code: str
    severity: str  # "error" | "warning"
    title: str
    explanation: str
    # A golden case (tests/golden/cases/NAME.vx) that docs/CODES.md shows with its output.
    example: str = ""


_TABLE = [
    # -- lexical and syntax ----------------------------------------------------
    Code(
        "E0001",
        "error",
        "source is not valid UTF-8",
        "Vx sources are UTF-8. The span points at the first byte that does not decode.",
    ),
    Code(
        "E0002",
        "error",
        "syntax error",
        "The parser met a token it did not expect. The message lists what it expected.",
    ),
    Code(
        "E0003",
        "error",
        "unterminated block comment",
        "A `/*` comment has no closing `*/`. Block comments do not nest.",
    ),
    Code(
        "E0004",
        "error",
        "nesting too deep",
        "Expressions or blocks nest deeper than the compiler's limit (200 levels). Split the "
        "expression with `let` bindings.",
    ),
    Code(
        "E0005",
        "error",
        "invalid literal",
        "A numeric or size literal is malformed or out of range (integers must fit in 64 bits).",
    ),
    # -- names and types -------------------------------------------------------
    Code(
        "E0101",
        "error",
        "unknown name",
        "A variable, function or parameter is used but never declared in scope.",
    ),
    Code(
        "E0102",
        "error",
        "duplicate definition",
        "Two items (functions, memories, topologies) or two parameters share a name.",
    ),
    Code(
        "E0103",
        "error",
        "unknown type",
        "A type name is not a scalar (`i32`, `f32`, ...), `Tensor`, `Vec`, `Token` or `void`.",
    ),
    Code(
        "E0106",
        "error",
        "view extent is not a compile-time constant",
        "Every range `lo .. hi` of a view (LANGUAGE.md section 4.2) must have a positive "
        "constant extent `hi - lo` once const parameters are substituted (`r .. r + 128`, "
        "`i * 128 .. (i + 1) * 128`): tiles have static shapes on every target's DMA engine. "
        "The offsets may be run-time values.",
    ),
    Code(
        "E0107",
        "error",
        "view used as a value",
        "A view `x[lo .. hi, ...]` is a place, like `tiles[i]`: it is the source of a "
        "`transfer` / `transfer_async` (the DMA reads the region) or, of a `&mut` output, its "
        "destination. It cannot be bound, moved, borrowed or computed on: transfer it into a "
        "space first.",
    ),
    Code(
        "E0108",
        "error",
        "store into a tensor that is not a `&mut` output",
        "The destination of a store (`transfer(t, c[...])`) is a view of a tensor taken as "
        "`&mut` (a kernel's output, which the caller allocates). A view of a `&` borrow or of "
        "a by-value tensor cannot be written: take the parameter as `c: &mut Tensor<...>`.",
    ),
    Code(
        "E0109",
        "error",
        "generic kernel entry without an instantiation",
        "A kernel entry with const parameters (`fn k<const N: i64>(...)`, which no Vx function "
        "calls) is built once per instantiation named on the command line (`vxc build --const "
        'N=1024`, Bazel\'s `vx_kernel(consts = {"N": "1024"})`). Without one there is '
        "nothing to build: name the values, or call it from another function.",
    ),
    Code(
        "E0111",
        "error",
        "`--const` names no const parameter",
        "Each `--const NAME=V` on a build (Bazel's `vx_kernel(consts = ...)`) gives the value "
        "of a const parameter of a generic kernel entry (`fn k<const NAME: i64>(...)`). A "
        "name that no entry declares is refused rather than ignored, since a misspelt name "
        "would otherwise build with another value than the one meant. The notes list the "
        "entries' const parameters.",
    ),
    Code(
        "E0110",
        "error",
        "dimension expression without a positive, exact value",
        "A dimension may be an expression of integer literals and const parameters with "
        "`+ - *` and exact `/` (`Tensor<f32, [BQ, 2 * BK]>`), evaluated when the function "
        "is monomorphised. With the instance's const values it must divide exactly and be "
        "positive, and it may name no runtime value (a shape parameter is a plain name, "
        "not part of an expression). The message names the values.",
    ),
    Code(
        "E0201",
        "error",
        "mismatched types",
        "An expression has a different type from the one its context requires. A `let` of an "
        "integer literal takes the type its uses ask for (`let kt = 8;` then `instance() / kt` "
        "is `i64`); when its uses disagree, annotate it (`let kt: i64 = 8;`).",
    ),
    Code(
        "E0202",
        "error",
        "wrong number of arguments",
        "A call passes a different number of arguments than the function declares.",
    ),
    Code(
        "E0203",
        "error",
        "not a function or method",
        "The callee is not a declared function, or the method does not exist for the type.",
    ),
    Code(
        "E0204",
        "error",
        "cannot infer const generic",
        "A const-generic parameter is not fixed by the arguments; pass it as `f::<N>(...)`.",
    ),
    Code(
        "E0205",
        "error",
        "invalid machine declaration",
        "A `Memory` or `Topology` facet is unknown or has a value of the wrong kind (or a "
        "`peak_gflops` that is not a positive integer).",
    ),
    Code(
        "E0206",
        "error",
        "invalid const parameter type",
        "A const-generic parameter is a compile-time integer that sizes dimensions and bounds, "
        "so its type is an integer type (`i8` ... `i64`, `u8` ... `u64`). As in Rust, a float "
        "(`<const S: f32>`) or any other type is rejected: pass such a value as an ordinary "
        "parameter.",
        example="E0206_float_const_parameter",
    ),
    # -- ownership -------------------------------------------------------------
    Code(
        "E0301",
        "error",
        "use of moved value",
        "Tensors and tokens are move-only. After a value is moved (passed by value, "
        "transferred, waited) its variable may not be used until it is assigned again. A token "
        "that was waited is moved.",
    ),
    Code(
        "E0302",
        "error",
        "conflicting borrows",
        "A value may have many shared borrows (`&`) or one unique borrow (`&mut`) at a time, "
        "and may not be moved while borrowed.",
    ),
    Code(
        "E0303",
        "error",
        "assignment to immutable variable",
        "Only variables declared with `let mut` can be assigned after their `let`.",
    ),
    Code(
        "E0305",
        "error",
        "mutable borrow of an immutable place",
        "`&mut x` needs a binding declared `let mut x` (Rust's E0596), or `x: &mut T`, which "
        "is reborrowed. Data behind a `&` reference (a `&T` parameter, an element of a "
        "`&Vec`) cannot be borrowed `&mut` either. The error points at the borrow, the note "
        "at the binding; the help adds `mut`.",
        example="E0305_mut_borrow_of_immutable_binding",
    ),
    Code(
        "E0304",
        "error",
        "cannot move out of a borrow",
        "An element reached through `&` (such as `tiles[i]` of `tiles: &Vec<...>`) can be "
        "read or be the source of a transfer, but not moved.",
    ),
    # -- launch (LANGUAGE.md section 4.1) ----------------------------------------
    Code(
        "E0401",
        "error",
        "kernel entry takes or returns a token",
        "A kernel entry (a function no Vx function calls) is launched as N instances, and its "
        "caller receives their results stacked along a new leading axis. A transfer token does "
        "not stack and its caller cannot `wait` it (nor issue one to pass in): `wait` the token "
        "inside the kernel and return the tensor. A `void` kernel is fine.",
    ),
    Code(
        "E0402",
        "error",
        "tensor dimension below 1",
        "A tensor dimension is 0 or negative (written, or a const argument substituted): a "
        "tile of no "
        "elements carries no data and no target can place it (TPU vector types and TMA boxes "
        "need positive sizes), so every target rejects it at check time. A `Vec` may be empty "
        "at run time; its elements may not.",
    ),
    Code(
        "E0403",
        "error",
        "`where` clauses that can never hold",
        "A function's `where` clauses, together with the launch facts `0 <= instance() < "
        "instances()` and `instances() >= 1`, are unsatisfiable (z3): no launch or call could "
        "ever run it, and every obligation proved under them would hold vacuously. Remove or "
        "correct the clause.",
    ),
    Code(
        "E0404",
        "error",
        "token where its tensor is expected",
        "A transfer token is used where its tensor is expected on a path the solver proves "
        "infeasible (so no E6004 counterexample exists). A token is never a tensor, whatever "
        "the path condition: `wait` it and use the waited tensor.",
    ),
    Code(
        "E0405",
        "error",
        "function call in a `where` clause",
        "A `where` clause is computed from the parameters, shape parameters, `v.len()` and "
        "the launch grid (`instance()`, `instances()`) only: on a kernel entry the launcher "
        "evaluates it before any instance runs, and the solver reads it as a fact. A call of "
        "a helper or an `extern fn` (also one named `instance` or `instances`, which shadows "
        "the intrinsic) or of another intrinsic has no value there. Write the condition on "
        "the parameters themselves.",
    ),
    Code(
        "E0406",
        "error",
        "tensor dimension past the target's index type",
        "A tensor type has a literal dimension larger than the target's index type holds: "
        "the TPU computes every index, shape and grid value in 32 bits, so a dimension is at "
        "most 2147483647 there (the cpu, b200 and h100 index in 64 bits). It is reported at "
        "check time, where the type is written; split the tensor into parts.",
    ),
    # -- placement (LANGUAGE.md section 7) ---------------------------------------
    Code(
        "E6001",
        "error",
        "no transfer route",
        "No chain of declared `transfer A -> B` edges of the function's topology leads from the "
        "tensor's space to the requested space.",
    ),
    Code(
        "E6002",
        "error",
        "unknown memory space or topology",
        "`Memory::X` or `Topology::X` names nothing declared in the machine model or program. "
        "The note lists the declared spaces, aliases included; a close name is suggested.",
    ),
    Code(
        "E6003",
        "error",
        "memory not visible to the core",
        "A function placed `on Topology::X` computes on a value in a space that `X` does not list "
        "as `visible`. Transfer it into a visible space first.",
    ),
    Code(
        "E6004",
        "error",
        "stale read across a seam",
        "A buffer may be read before its data is published: it crossed a `relaxed` transfer "
        "edge, or its transfer token was not waited yet. z3 found the stale state; its model "
        "is printed as the counterexample, then said in words: the path the data came over and "
        "the state the buffer is in when it is read. Wait the token (or route over a "
        "synchronizing edge) before reading.",
    ),
    Code(
        "E6005",
        "error",
        "bound not proved",
        "A call passes an argument that the callee's `where` clause bounds, and neither the "
        "literal value nor the caller's own bounds prove it.",
    ),
    Code(
        "E6006",
        "error",
        "`within` cycle",
        "The `within` facets of `Memory` declarations form a tree (LANGUAGE.md section 2): a "
        "space that is, through any chain of `within`, within itself is rejected at the "
        "declaration that closes the cycle (in declaration order: the target's model, then "
        "`--machine`, then the program).",
        example="E6006_within_cycle",
    ),
    Code(
        "E6007",
        "error",
        "child space larger than its parent",
        "A `Memory` declared `within` another has a larger capacity than that parent.",
    ),
    Code(
        "E6009",
        "error",
        "tensor exceeds capacity",
        "A tensor is larger than the capacity of a space it is transferred into.",
    ),
    Code(
        "E6010",
        "error",
        "working set exceeds capacity",
        "Tiles that each fit are live in a space at the same time, and together exceed its "
        "capacity. Lifetimes decide what is live: a waited and dead tile frees its slot. "
        "Every space with a capacity is checked unless it is declared `managed: cached` "
        "(`managed` defaults to `explicit`). The error is at the transfer that first "
        "overflows, and names the peak working set and the line where it is reached. The "
        "check counts each function's own tiles; a helper's, inlined into its kernel at "
        "build time (above the kernel's), that no longer fit are E6010 at the call.",
    ),
    Code(
        "E6011",
        "error",
        "transfer token dropped without wait",
        "A token from `transfer_async` must be consumed by exactly one `wait` on every path: "
        "at the end of its scope, before it is overwritten, and before a `return`.",
    ),
    Code(
        "E6012",
        "error",
        "tile outside the DMA engine's limits",
        "On a target whose DMA engine copies boxes (b200 and h100: the TMA), every tile moved "
        "between HBM and VMEM must be a legal box: each dimension at most 256 elements, and "
        "a row (the innermost dimension) a multiple of 16 bytes. The message names the value "
        "and the limit; split or pad the tile.",
    ),
    Code(
        "E6041",
        "error",
        "view or index out of bounds",
        "A view `x[lo .. hi, ...]` must lie inside its tensor, `0 <= lo` and `hi <= dim` in "
        "every dimension, for every value the parameters, shape parameters, `where` clauses, "
        "loop ranges and launch facts allow; z3 proves it (nonlinear arithmetic where an index "
        "divides by a non-literal). The counterexample names the values; add a `where` clause "
        "or change the index. A `Vec` index that is out of bounds for every allowed value is "
        "this error too (one that may be out of bounds keeps its run-time check). A query z3 "
        "does not decide within the compilation's budget is reported as not proved.",
    ),
    Code(
        "E6042",
        "error",
        "instances may write overlapping regions",
        "Instances run in any order and at once, so every pair of stores of two instances "
        "`p != q` to one output must touch disjoint regions. z3 found two instances and an "
        "element both write (or could not prove disjointness within the budget). A load from "
        "an output races too: one instance may not read a region another instance writes "
        "(the result would depend on the order they run). A kernel whose stores do not "
        "depend on `instance()` needs `where instances() == 1`, and so does one that passes a "
        "tensor parameter to an `extern fn`'s `&mut` parameter (the extern writes all of it, "
        "in every instance). Integers a loop assigns are "
        "read at every iteration (a counter `r = r + 128` in closed form), and the "
        "counterexample names the iteration.",
    ),
    Code(
        "E6043",
        "error",
        "store source or destination touched while the store is in flight",
        "`transfer_async(t, out[...])` reads `t` and writes `out[...]` until its token is "
        "waited. Writing `t` (`&mut t`), assigning or re-binding it (its slot is reused), or "
        "moving it away before `wait` races with the DMA; so does reading elements of the "
        "destination region, or storing to them again, before the `wait` (the DMA may land "
        "before or after). The path that reaches it, or an element both touch, is shown. "
        "Wait the store's token first.",
    ),
    Code(
        "E6044",
        "error",
        "tile arithmetic on operands in different spaces",
        "The result of tile arithmetic (LANGUAGE.md section 4.3) lives where its tile "
        "operands live, so the tile operands of one operation must share a space (an "
        "accumulator in `ACC` and a bias in `VMEM` do not). Scalars adapt. `transfer` one "
        "operand into the other's space first.",
    ),
    Code(
        "E6045",
        "error",
        "scalar conversion out of range",
        "`cast::<E>(n)` of an integer (LANGUAGE.md section 4.3) saturates at `E`'s range "
        "where it cannot be shown to fit; where the checks find a value the parameters, "
        "`where` clauses and loop ranges allow that lies outside it (`cast::<i32>(n)` with "
        "`n` up to 2^40), the conversion is an error with that value as the counterexample. "
        "Bound the value with a `where` clause, or cast to a wider type.",
    ),
    Code(
        "E6013",
        "error",
        "granule larger than capacity",
        "A `Memory` declares a `granule` (its allocation unit) larger than its `capacity`: not "
        "even one tile fits. The error is at the `granule` facet.",
    ),
    Code(
        "E6014",
        "error",
        "layout past the IR's 64-bit offsets",
        "A space without a capacity lays out its granule-rounded rings past 2^63-1 bytes, the "
        "most the IR's i64 offset and size attributes hold. Give the space a capacity or a "
        "smaller granule.",
    ),
    Code(
        "E6015",
        "error",
        "solver undecided",
        "z3 returned `unknown` for an obligation. Proofs are sound: an undecided query is an "
        "error, never a pass. Simplify the arithmetic the obligation depends on.",
    ),
    # -- backend refusals: a valid program the target cannot be built for -------
    Code(
        "E7001",
        "error",
        "op has no lowering on this target",
        "The program is valid, but the backend of the target has no lowering for an "
        "operation it needs (the message names it). `vxc check` accepts the program; "
        "another target, or `--emit vx-mlir`, builds it.",
    ),
    Code(
        "E7002",
        "error",
        "call not lowered on this target",
        "A call the target cannot make. Every target inlines Vx helpers into their kernel; "
        "a recursive helper cannot be inlined (the cpu calls it, the tpu and GPU targets "
        "refuse the call), an `extern fn` is host code a TPU kernel cannot reach and has "
        "no device library to link on the GPUs, and a helper result placed in the caller's "
        "scratchpad that inlining cannot produce there is refused. The span is the call.",
    ),
    Code(
        "E7003",
        "error",
        "kernel signature the target does not take",
        "A kernel entry's parameters or results have a form the target's launch cannot pass: "
        "for example a TPU scalar parameter of a type SMEM does not hold (f16), a parameter "
        "outside HBM, a result "
        "that is not a tensor transferred into HBM, or C names that collide.",
    ),
    Code(
        "E7004",
        "error",
        "tile shape or element type the target does not move",
        "A tensor's shape or element type has no form on the target: a dynamically shaped "
        "tile in a scratchpad, a GPU tile that is not 2-D and static, or an element type the "
        "target has no storage for. The message names the type.",
    ),
    Code(
        "E7005",
        "error",
        "placement or transfer the target does not lower",
        "A transfer, new tensor or buffer lives where the target's backend cannot put it, or "
        "moves along a route it has no copy engine for (a TPU transfer into HBM that is not "
        "the kernel's result, an async copy the GPU's TMA cannot make, one scratch ring used "
        "in two layouts).",
    ),
    Code(
        "E7006",
        "error",
        "loop-carried or joined value without a form on the target",
        "A value carried around a `for` loop, or joined after an `if`, changes what it is "
        "between iterations or branches, or is a kind the target cannot carry in registers "
        "(carry a token rather than a tensor).",
    ),
    Code(
        "E7007",
        "error",
        "matmul_acc operands the matrix unit does not take",
        "The operands of `matmul_acc` have element types, shapes, spaces or layouts the "
        "target's matrix unit cannot multiply (the message gives the limit: f32/bf16/f16, "
        "M = 128 and N a multiple of 16 on the GPUs, operands in VMEM on the TPU).",
    ),
    Code(
        "E7008",
        "error",
        "beyond a limit of the target's backend",
        "The program fits the machine model, but the backend's own layout of it exceeds a "
        "limit of the chip: the shared memory of a GPU block (tiles plus barriers), a TMA "
        "box, the TPU's scoped VMEM with its tile padding, or a constant wider than the "
        "TPU's 32-bit scalar unit.",
    ),
    Code(
        "E7009",
        "error",
        "launch precondition false for this build",
        "A kernel's `where` clause is false for the launch the artifact is built for (on the "
        "TPU the grid is static: `--tpu-instances N`), so every call would fail it.",
    ),
    Code(
        "E7010",
        "error",
        "form the vx IR does not express",
        "A checked program uses a form that the lowering to the vx dialect does not handle "
        "in this version (for example a `return` inside a loop, an `if` or a `spawn`; a new "
        "tensor of runtime shape). The message says what to write instead.",
    ),
    Code(
        "E7011",
        "error",
        "scalar type without a form on the target",
        "A scalar (a loop counter, an index, a parameter) has a type the target's scalar "
        "unit does not have: the TPU computes in 32 bits, the GPUs lower integer scalars.",
    ),
    # -- warnings --------------------------------------------------------------
    Code(
        "W1027",
        "warning",
        "relaxed transfer edge",
        "A topology declares a `relaxed` edge: data crossing it is not published with a "
        "release, so every read after it is checked (E6004).",
    ),
    Code(
        "W1029",
        "warning",
        "unverified dynamic shape",
        "A tensor with a runtime dimension is placed into a capacity-bounded space; without a "
        "`where` bound on that dimension its size cannot be checked. The message names the "
        "space the tensor lands in.",
    ),
    Code(
        "W1040",
        "warning",
        "tuning table value for no const parameter",
        "The kernel's tuning table (`KERNEL.tune.json`, LANGUAGE.md 3) gives a value for a "
        "name that no generic kernel entry declares as a const parameter: the value is not "
        "used. The table was likely written for another version of the kernel; `vxc tune` "
        "refreshes it.",
    ),
    Code(
        "W1041",
        "warning",
        "stale tuning table",
        "The kernel's tuning table was written for other source bytes (its `source_sha256` "
        "is not the source's digest). Its values are still used as written, since a build "
        "never measures: they were chosen for another version of the kernel, so `vxc tune` "
        "should be run again; the message names the command.",
    ),
]

CODES: dict[str, Code] = {c.code: c for c in _TABLE}

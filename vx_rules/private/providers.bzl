"""Providers of the Vx rules."""

VxKernelInfo = provider(
    doc = "A kernel compiled for one target.",
    fields = {
        "name": "the kernel's name (the vx_kernel target name)",
        "target": "the Vx target it was built for: cpu, tpu, b200 or h100",
        "artifact_dir": "File (a tree artifact) holding the compiler's outputs, each named <stem>.<target>.<ext>",
        "hir": "File: the checked-HIR cache (.vxhir) the artifact was built from",
        "srcs": "depset of the kernel's .vx sources (deps included)",
        "machine": "File or None: the machine model the kernel was checked against",
    },
)

VxSourcesInfo = provider(
    doc = "The .vx sources of a kernel and its deps, and its machine model.",
    fields = {
        "srcs": "depset of .vx Files, in dependency order",
        "machine": "File or None",
    },
)

VxHirInfo = provider(
    doc = "The checked HIR of a source set, computed once in the target-independent configuration.",
    fields = {
        "hir": "File: the .vxhir protobuf",
        "srcs": "depset of .vx Files",
        "machine": "File or None",
    },
)

VxToolchainInfo = provider(
    doc = "How to run the Vx compiler: the interpreter, its locked environment and the compiler sources.",
    fields = {
        "python": "File or None: the interpreter of the locked environment (local execution)",
        "python_path": "str: or the interpreter's absolute path on the execution platform ('' with python)",
        "interpreter": "File: what actions execute (python, else a /bin/sh wrapper that execs python_path)",
        "interpreter_args": "list of str: the interpreter's flags (-S -B)",
        "tools": "depset of Files: the interpreter, compiler and compiler_runtime",
        "runtime": "depset of Files: the locked environment (site-packages, pyvenv.cfg, its identity file)",
        "compiler_runtime": "depset of Files: the part of runtime that the compiler imports",
        "compiler": "depset of Files: the vxc package sources",
        "pythonpath": "str: PYTHONPATH of actions: the execroot-relative directory that holds the vxc package, then site-packages",
        "runfiles_pythonpath": "list of str: the same two directories, relative to a runfiles tree's root",
    },
)

"""The Vx toolchain: which interpreter, environment and compiler the rules run.

The interpreter is a property of the execution platform. The default toolchain runs
the locked environment's interpreter (a File: the one this machine provisioned);
a toolchain for a remote execution platform names instead the absolute path the
executor image provides (`python_path`). Everything else the compiler imports is an
input: the vxc sources and the locked site-packages, which actions put on
PYTHONPATH and import with `-S` (no site module, so no venv, no .pth file and no
path of the machine that provisioned the environment reaches an action).
"""

load(":providers.bzl", "VxToolchainInfo")

TOOLCHAIN_TYPE = str(Label("//vx_rules:toolchain_type"))

# -S: no site module (site-packages come from PYTHONPATH, an input); -B: no bytecode
# written into inputs or the store.
INTERPRETER_ARGS = ["-S", "-B"]

def _runfiles_path(f, workspace_name):
    # short_path is "../repo/path" for a file of an external repository.
    if f.short_path.startswith("../"):
        return f.short_path[3:]
    return workspace_name + "/" + f.short_path

def _package_root(files, workspace_name):
    for f in files:
        if f.path.endswith("vxc/__init__.py") and f.path.count("/vxc/") == 1:
            root = f.dirname.rsplit("/", 1)[0] if "/" in f.dirname else "."
            rroot = _runfiles_path(f, workspace_name).rsplit("/", 2)[0]
            return root, rroot
    fail("the vx toolchain's compiler files contain no vxc/__init__.py")

def _site_packages(files, workspace_name):
    marker = "/site-packages/"
    for f in files:
        if marker in f.path:
            rpath = _runfiles_path(f, workspace_name)
            return f.path[:f.path.index(marker) + len(marker) - 1], rpath[:rpath.index(marker) + len(marker) - 1]
    fail("the vx toolchain's compiler_runtime holds no site-packages directory")

def _vx_toolchain_impl(ctx):
    compiler = ctx.files.compiler
    root, rroot = _package_root(compiler, ctx.workspace_name)
    site, rsite = _site_packages(ctx.files.compiler_runtime, ctx.workspace_name)
    if (ctx.file.python == None) == (ctx.attr.python_path == ""):
        fail("vx_toolchain %s: give exactly one of python (a File) and python_path (the executor's interpreter)" % ctx.label)
    if ctx.attr.python_path and not ctx.attr.python_path.startswith("/"):
        fail("vx_toolchain %s: python_path must be absolute, got %r" % (ctx.label, ctx.attr.python_path))
    interpreter = ctx.file.python
    if interpreter == None:
        # The executable is a two-line /bin/sh wrapper (no path of this machine
        # in it besides python_path, identical for every clone), not the string:
        # Bazel 4.2.3 counts only a File executable as the spawn's tool, and the
        # worker strategy refuses a spawn without one.
        interpreter = ctx.actions.declare_file(ctx.label.name + "_python.sh")
        ctx.actions.write(
            interpreter,
            "#!/bin/sh\n# The execution platform's interpreter (vx_toolchain %s).\nexec %s \"$@\"\n" % (ctx.label.name, ctx.attr.python_path),
            is_executable = True,
        )
    info = VxToolchainInfo(
        python = ctx.file.python,
        python_path = ctx.attr.python_path,
        interpreter = interpreter,
        interpreter_args = INTERPRETER_ARGS,
        tools = depset([interpreter], transitive = [depset(compiler), depset(ctx.files.compiler_runtime)]),
        runtime = depset(ctx.files.runtime),
        compiler_runtime = depset(ctx.files.compiler_runtime),
        compiler = depset(compiler),
        pythonpath = root + ":" + site,
        runfiles_pythonpath = [rroot, rsite],
    )
    return [platform_common.ToolchainInfo(vx = info)]

vx_toolchain = rule(
    implementation = _vx_toolchain_impl,
    attrs = {
        "python": attr.label(allow_single_file = True, cfg = "exec", doc = "the interpreter, as a file (local execution)"),
        "python_path": attr.string(doc = "or: the interpreter's absolute path on the execution platform (e.g. an executor image's /usr/bin/python3.11); its version must match the environment's"),
        "runtime": attr.label(allow_files = True, mandatory = True, cfg = "exec", doc = "its locked environment (vx_test runfiles)"),
        "compiler_runtime": attr.label(allow_files = True, mandatory = True, cfg = "exec", doc = "the part of it the compiler imports (VxCompile inputs)"),
        "compiler": attr.label(allow_files = True, mandatory = True, cfg = "exec", doc = "the vxc package sources"),
    },
    doc = "Declares a Vx compiler: an interpreter, its locked environment and the vxc sources.",
)

runfiles_path = _runfiles_path

"""The Vx toolchain: which interpreter, environment and compiler the rules run."""

load(":providers.bzl", "VxToolchainInfo")

TOOLCHAIN_TYPE = str(Label("//vx_rules:toolchain_type"))

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

def _vx_toolchain_impl(ctx):
    compiler = ctx.files.compiler
    root, rroot = _package_root(compiler, ctx.workspace_name)
    info = VxToolchainInfo(
        python = ctx.file.python,
        runtime = depset(ctx.files.runtime),
        compiler_runtime = depset(ctx.files.compiler_runtime),
        compiler = depset(compiler),
        pythonpath = root,
        runfiles_pythonpath = rroot,
    )
    return [platform_common.ToolchainInfo(vx = info)]

vx_toolchain = rule(
    implementation = _vx_toolchain_impl,
    attrs = {
        "python": attr.label(allow_single_file = True, mandatory = True, cfg = "exec", doc = "the interpreter"),
        "runtime": attr.label(allow_files = True, mandatory = True, cfg = "exec", doc = "its locked environment (vx_test runfiles)"),
        "compiler_runtime": attr.label(allow_files = True, mandatory = True, cfg = "exec", doc = "the part of it the compiler imports (VxCompile inputs)"),
        "compiler": attr.label(allow_files = True, mandatory = True, cfg = "exec", doc = "the vxc package sources"),
    },
    doc = "Declares a Vx compiler: an interpreter, its locked environment and the vxc sources.",
)

runfiles_path = _runfiles_path

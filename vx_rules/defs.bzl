"""Public API of the Vx Bazel rules.

    load("@vx//vx_rules:defs.bzl", "vx_kernel", "vx_multi_kernel", "vx_test")

    vx_library(name, srcs, deps = [], machine = None)
        Vx sources shared by kernels (their `deps`).
    vx_kernel(name, srcs, deps = [], machine = None, consts = {}, tune = "auto", emit = "artifact", targets = TARGETS)
        One artifact directory, <name>.<target>/, for the configured target
        (//vx_rules:target, set with --config=cpu|tpu|b200|h100); every file in it
        is named <stem>.<target>.<ext>. Its checked HIR (<name>.vxhir) is built
        once, in a configuration shared by every target. emit = "vx-mlir" or
        "target-ir" produces that IR instead of the artifact, "report" the cost
        report (<stem>.<target>.report.txt and .roofline.svg, as `vxc report`).
        `consts = {"N": "1024"}` instantiates generic entries (`vxc build --const`).
        `tune`: a tuning table (LANGUAGE.md 3) whose entry for the configured target
        gives const values after `consts`; by default KERNEL.tune.json beside the
        first source when the package has one, None for none.
        `targets` lists the targets the kernel builds for (default all): under
        another --config it is incompatible (target_compatible_with), so
        `bazel build //...` skips it and its dependents instead of failing.
    vx_test(name, kernel, srcs = [...], data = [], ...)
        Runs pytest on srcs with VX_TARGET, VX_KERNEL, VX_ARTIFACT_DIR and
        VX_SOURCES set for `kernel` as configured; the test fails if it runs no test.
    vx_multi_kernel(name, kernel, targets = ["cpu", "tpu", "b200", "h100"])
        Builds `kernel` for each target in one invocation (a split transition),
        each in its own configured output directory. List only targets the kernel
        builds for (its `targets`): one incompatible split makes this incompatible.
    vx_cpu_only()
        target_compatible_with for C/C++ callers of a kernel: under --config=cpu a
        vx_kernel provides CcInfo; under another target such a caller is skipped.
    vx_targets_only(targets)
        target_compatible_with for a target that builds under these Vx targets only
        (what vx_kernel's `targets` becomes; for callers of such a kernel too).
"""

load("//vx_rules/private:kernel.bzl", _vx_hir = "vx_hir", _vx_kernel_rule = "vx_kernel_rule", _vx_library = "vx_library")
load("//vx_rules/private:multi.bzl", _check_targets = "check_targets", _vx_multi_kernel_rule = "vx_multi_kernel_rule")
load("//vx_rules/private:providers.bzl", _VxKernelInfo = "VxKernelInfo", _VxToolchainInfo = "VxToolchainInfo")
load("//vx_rules/private:target_flag.bzl", _TARGETS = "TARGETS")
load("//vx_rules/private:test.bzl", _vx_test = "vx_test")
load("//vx_rules/private:toolchain.bzl", _vx_toolchain = "vx_toolchain")

VxKernelInfo = _VxKernelInfo
VxToolchainInfo = _VxToolchainInfo
TARGETS = _TARGETS
vx_toolchain = _vx_toolchain

# vx_library(name, srcs, deps = [], machine = None): sources for vx_kernel's deps.
vx_library = _vx_library

def vx_targets_only(targets):
    """target_compatible_with for a target that builds under these Vx targets only.
    vx_kernel(targets = ...) uses it; give it to a native py_test/cc_test caller of such a
    kernel as well: Bazel 4.2.3 skips a dependent of an incompatible target, but its
    native rules crash analysing one that expands $(rootpath) of it in `env`."""
    _check_targets(targets, "vx_targets_only")
    if not targets:
        fail("vx_targets_only: no target; list at least one of %s" % ", ".join(_TARGETS))
    off = [str(Label("//vx_rules:not_a_kernel_target"))]
    cases = {str(Label("//vx_rules:is_" + t)): ([] if t in targets else off) for t in _TARGETS}
    cases["//conditions:default"] = []  # the HIR configuration (never a kernel's own)
    return select(cases)

def _table_beside(srcs):
    """`KERNEL.tune.json` beside the first source, when this package has one (or None)."""
    first = srcs[0] if srcs else None
    if not first or type(first) != "string" or not first.endswith(".vx") or ":" in first:
        return None
    found = native.glob([first[:-len(".vx")] + ".tune.json"], allow_empty = True)
    return found[0] if found else None

def vx_kernel(name, srcs, deps = [], machine = None, consts = {}, tune = "auto", visibility = None, tags = [], targets = _TARGETS, target_compatible_with = [], **kwargs):
    _vx_hir(
        name = name + "_hir",
        kernel_name = name,
        srcs = srcs,
        deps = deps,
        machine = machine,
        consts = consts,
        visibility = ["//visibility:private"],
        tags = tags,
    )
    _vx_kernel_rule(
        name = name,
        hir = ":" + name + "_hir",
        srcs = srcs,
        deps = deps,
        machine = machine,
        consts = consts,
        tune = _table_beside(srcs) if tune == "auto" else tune,
        visibility = visibility,
        tags = tags,
        target_compatible_with = vx_targets_only(targets) + target_compatible_with,
        **kwargs
    )

def vx_test(name, kernel, srcs, data = [], **kwargs):
    _vx_test(name = name, kernel = kernel, srcs = srcs, data = data, **kwargs)

def vx_multi_kernel(name, kernel, targets = _TARGETS, **kwargs):
    _check_targets(targets, "vx_multi_kernel %s" % name)
    _vx_multi_kernel_rule(name = name, kernel = kernel, targets = targets, **kwargs)

def vx_cpu_only():
    """target_compatible_with for a cc_* target that links a vx_kernel: compatible
    under the cpu configuration only (other targets' artifacts are not C code)."""
    return select({
        str(Label("//vx_rules:is_cpu")): [],
        "//conditions:default": [str(Label("//vx_rules:not_cpu_config"))],
    })

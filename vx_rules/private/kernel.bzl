"""vx_kernel's private rules: the checked HIR (one configuration for all targets)
and the per-target build, both VxCompile actions."""

load(":cc.bzl", "CC_ATTRS", "CC_TOOLCHAIN_TYPE", "cc_toolchain_and_features", "kernel_cc_info", "link_shared_library")
load(":providers.bzl", "VxHirInfo", "VxKernelInfo", "VxSourcesInfo")
load(":target_flag.bzl", "HIR_CONFIG_TARGET", "TARGETS", "VxCpuInfo", "VxTargetInfo", "hir_transition")
load(":toolchain.bzl", "TOOLCHAIN_TYPE")

# The action environment is explicit (no use_default_shell_env): the client's PATH
# never enters an action key. No action runs a tool from PATH (the cpu shared library
# is linked by the C++ toolchain, see cc.bzl); PATH is pinned all the same.
def action_env(tc):
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": tc.pythonpath,
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
    }

# supports-workers: Bazel may run VxCompile in the persistent worker (its default
# strategy list tries a worker first); a remote executor or --strategy=VxCompile=local
# runs the same arguments one-shot, with the same outputs.
_EXEC_REQS = {"supports-workers": "1"}

def _sources(ctx):
    deps = [d[VxSourcesInfo].srcs for d in ctx.attr.deps]
    # The kernel's own sources first: the compiler names its outputs after the first.
    srcs = depset(ctx.files.srcs, transitive = deps, order = "preorder")
    machine = ctx.file.machine
    if machine == None:
        for d in ctx.attr.deps:
            if d[VxSourcesInfo].machine != None:
                machine = d[VxSourcesInfo].machine
                break
    return srcs, machine

def _src_args(args, srcs, machine, consts):
    args.add_all(srcs, before_each = "--src")
    if machine != None:
        args.add("--machine", machine)

    # The analysis flags (vxc/targets.py ANALYSIS_FLAGS): the hir and the build request
    # both name the instantiation (the HIR's key includes it).
    args.add_all(["%s=%s" % (k, consts[k]) for k in sorted(consts)], before_each = "--const")

def _run_vxcompile(ctx, tc, args, inputs, outputs, progress):
    args.use_param_file("@%s", use_always = True)
    args.set_param_file_format("multiline")
    launch = ctx.actions.args()
    launch.add_all(tc.interpreter_args + ["-m", "vxc.worker"])
    ctx.actions.run(
        executable = tc.interpreter,
        arguments = [launch, args],
        inputs = depset(inputs),
        tools = tc.tools,
        outputs = outputs,
        mnemonic = "VxCompile",
        progress_message = progress,
        execution_requirements = _EXEC_REQS,
        env = action_env(tc),
    )

_COMMON_ATTRS = {
    "srcs": attr.label_list(allow_files = [".vx"], mandatory = True, doc = "the kernel's .vx sources"),
    "deps": attr.label_list(providers = [VxSourcesInfo], doc = "vx_library targets whose sources are compiled with this kernel's"),
    "machine": attr.label(allow_single_file = [".vx"], doc = "a machine model; default: the target's own"),
}

# The checked HIR and the build of one instantiation (not vx_library's: sources only).
_CONSTS_ATTR = {
    "consts": attr.string_dict(doc = "the generic entries' const parameters, NAME -> integer (`vxc build --const NAME=VALUE`)"),
}

def _vx_hir_impl(ctx):
    tc = ctx.toolchains[TOOLCHAIN_TYPE].vx
    srcs, machine = _sources(ctx)
    out = ctx.actions.declare_file(ctx.attr.kernel_name + ".vxhir")
    args = ctx.actions.args()
    args.add("hir")
    args.add("--out", out)
    _src_args(args, srcs, machine, ctx.attr.consts)
    inputs = srcs.to_list() + ([machine] if machine else [])
    _run_vxcompile(ctx, tc, args, inputs, [out], "VxCompile checking %s (all targets)" % ctx.label)
    return [
        DefaultInfo(files = depset([out])),
        VxHirInfo(hir = out, srcs = srcs, machine = machine),
    ]

# The incoming transition puts the checked HIR in the one target-independent
# configuration however it is reached: through a vx_kernel in any config, or as a
# top-level target of a pattern such as //kernels/...
vx_hir = rule(
    implementation = _vx_hir_impl,
    cfg = hir_transition,
    attrs = dict(
        _COMMON_ATTRS.items() + _CONSTS_ATTR.items(),
        kernel_name = attr.string(mandatory = True),
        _allowlist_function_transition = attr.label(
            default = Label("@bazel_tools//tools/allowlists/function_transition_allowlist"),
        ),
    ),
    toolchains = [TOOLCHAIN_TYPE],
    doc = "The checked HIR (.vxhir) of a kernel's sources: target-independent, cacheable.",
)

# A copy into the artifact directory, by the toolchain's interpreter (not `cp` on PATH).
# It creates the directory: a remote worker creates only an output directory's
# parents (REAPI Command.output_directories), unlike Bazel's local strategies.
_COPY = "import os, shutil, sys; os.makedirs(sys.argv[1], exist_ok=True); [shutil.copyfile(f, sys.argv[1] + '/' + f.rsplit('/', 1)[-1]) for f in sys.argv[2:]]"

def _cpu_artifact(ctx, tc, target, out_dir):
    """The cpu artifact as files: VxCompile writes the object, header and manifest (with
    --link none), the C++ toolchain links the shared library and archives the object for
    CcInfo, and the four files are copied into the artifact directory vx_test reads."""
    stem = ctx.files.srcs[0].basename[:-len(".vx")]
    files = {
        ext: ctx.actions.declare_file("_%s.%s/%s.%s.%s" % (ctx.label.name, target, stem, target, ext))
        for ext in ["o", "h", "json", "so"]
    }
    cc_toolchain, features = cc_toolchain_and_features(ctx)
    link_shared_library(ctx, cc_toolchain, features, files["o"], files["so"])
    cc_info = kernel_cc_info(ctx, cc_toolchain, features, files["o"], files["h"], "%s.%s" % (ctx.label.name, target))
    ctx.actions.run(
        executable = tc.interpreter,
        arguments = ["-S", "-c", _COPY, out_dir.path] + [files[e].path for e in ["o", "h", "json", "so"]],
        inputs = files.values(),
        tools = depset([tc.interpreter], transitive = [tc.compiler_runtime]),
        outputs = [out_dir],
        mnemonic = "VxArtifact",
        progress_message = "Collecting %s" % out_dir.short_path,
        env = action_env(tc),
    )
    return [files["o"], files["h"], files["json"]], files, cc_info

def _vx_kernel_impl(ctx):
    tc = ctx.toolchains[TOOLCHAIN_TYPE].vx
    target = ctx.attr._target[VxTargetInfo].target
    if target == HIR_CONFIG_TARGET:
        fail("%s: no Vx target is configured; use --config=%s" % (ctx.label, "|".join(TARGETS)))
    hir = ctx.attr.hir[VxHirInfo]
    srcs, machine = _sources(ctx)
    out_dir = ctx.actions.declare_directory("%s.%s" % (ctx.label.name, target))
    cpu_artifact = target == "cpu" and ctx.attr.emit == "artifact"
    if cpu_artifact:
        outputs, files, cc_info = _cpu_artifact(ctx, tc, target, out_dir)
    else:
        outputs, files, cc_info = [out_dir], {}, CcInfo()
    args = ctx.actions.args()
    args.add("build")
    args.add("--hir", hir.hir)
    _src_args(args, srcs, machine, ctx.attr.consts)
    args.add("--target", target)
    args.add("--emit", ctx.attr.emit)
    args.add("--cpu", ctx.attr._cpu[VxCpuInfo].cpu)
    if target == "tpu" and ctx.attr.emit == "artifact":
        # libtpu compiles the export for both chips: a module Mosaic rejects fails the build.
        args.add("--tpu-aot", "v5e,v6e")
    if target == "tpu" and ctx.attr.tpu_instances:
        args.add("--tpu-instances", str(ctx.attr.tpu_instances))
    if cpu_artifact:
        args.add("--link", "none")
        args.add("--out-dir", files["o"].dirname)
    else:
        args.add_all([out_dir], before_each = "--out-dir", expand_directories = False)
    inputs = [hir.hir] + srcs.to_list() + ([machine] if machine else [])
    if ctx.file.tune:
        # LANGUAGE.md 3: the table's entry for this target gives const values after `consts`
        # (read as data, never measured: a stale table is a warning, W1041).
        args.add("--tune", ctx.file.tune)
        inputs.append(ctx.file.tune)
    _run_vxcompile(ctx, tc, args, inputs, outputs, "VxCompile %s for %s (%s)" % (ctx.label, target, ctx.attr.emit))
    return [
        # The artifact directory is the one file, so $(rootpath) names it (py_test).
        DefaultInfo(files = depset([out_dir]), runfiles = ctx.runfiles(files = [out_dir])),
        # cc_* callers link the kernel (cpu artifact); empty for other targets and emits.
        cc_info,
        VxKernelInfo(
            name = ctx.label.name,
            target = target,
            artifact_dir = out_dir,
            hir = hir.hir,
            srcs = srcs,
            machine = machine,
        ),
        OutputGroupInfo(**{target: depset([out_dir]), "vxhir": depset([hir.hir])}),
    ]

vx_kernel_rule = rule(
    implementation = _vx_kernel_impl,
    attrs = dict(
        _COMMON_ATTRS.items() + _CONSTS_ATTR.items() + CC_ATTRS.items(),
        hir = attr.label(mandatory = True, providers = [VxHirInfo]),
        tune = attr.label(
            allow_single_file = [".tune.json"],
            doc = "a tuning table (KERNEL.tune.json, LANGUAGE.md 3); vx_kernel passes the " +
                  "one beside the first source when there is one",
        ),
        emit = attr.string(
            default = "artifact",
            values = ["artifact", "vx-mlir", "target-ir", "report"],
            doc = "what to produce: the target's artifact, the vx dialect module, the target IR, " +
                  "or the cost report (<stem>.<target>.report.txt and .roofline.svg, as `vxc report`)",
        ),
        tpu_instances = attr.int(
            default = 0,
            doc = "tpu: the launch grid the artifact is built for (a Mosaic grid is static); " +
                  "0 = a plain call, N = N instances with stacked results (in the manifest)",
        ),
        _target = attr.label(default = Label("//vx_rules:target")),
        _cpu = attr.label(default = Label("//vx_rules:cpu")),
    ),
    toolchains = [TOOLCHAIN_TYPE, CC_TOOLCHAIN_TYPE],
    fragments = ["cpp"],
    doc = "One kernel compiled for the configured target (//vx_rules:target); for the cpu " +
          "artifact also CcInfo, so cc_binary/cc_test/cc_library deps link it.",
)

def _vx_library_impl(ctx):
    srcs, machine = _sources(ctx)
    return [
        DefaultInfo(files = depset(ctx.files.srcs)),
        VxSourcesInfo(srcs = srcs, machine = machine),
    ]

# Sources shared by kernels. Target-independent, so it is as valid in the HIR
# configuration as in any target's.
vx_library = rule(
    implementation = _vx_library_impl,
    attrs = _COMMON_ATTRS,
    doc = "Vx sources (and optionally a machine model) that vx_kernel deps compile with.",
)

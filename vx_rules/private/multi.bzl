"""vx_multi_kernel: one kernel built for several targets in one invocation."""

load(":providers.bzl", "VxKernelInfo")
load(":target_flag.bzl", "TARGETS", "split_targets_transition")

def _vx_multi_kernel_impl(ctx):
    split = ctx.split_attr.kernel
    files = []
    groups = {}
    for t in ctx.attr.targets:
        if t not in split:
            fail("%s: no configuration for target %r" % (ctx.label, t))
        info = split[t][VxKernelInfo]
        files.append(info.artifact_dir)
        groups[t] = depset([info.artifact_dir])
    return [DefaultInfo(files = depset(files)), OutputGroupInfo(**groups)]

def _check_targets(targets, what):
    for t in targets:
        if t not in TARGETS:
            fail("%s: unknown target %r; expected some of %s" % (what, t, ", ".join(TARGETS)))

vx_multi_kernel_rule = rule(
    implementation = _vx_multi_kernel_impl,
    attrs = {
        "kernel": attr.label(mandatory = True, providers = [VxKernelInfo], cfg = split_targets_transition),
        "targets": attr.string_list(default = TARGETS),
        "_allowlist_function_transition": attr.label(
            default = Label("@bazel_tools//tools/allowlists/function_transition_allowlist"),
        ),
    },
    doc = "Builds `kernel` for each of `targets`, each in its own configured output directory.",
)

check_targets = _check_targets

"""The build setting //vx_rules:target and the transitions that set it."""

TARGETS = ["cpu", "tpu", "b200", "h100"]

# The value the checked-HIR configuration carries: every top-level target maps to
# this one configuration, so the HIR action has one output path and one action key
# whatever --config was used, and Bazel's caches reuse it across configs.
HIR_CONFIG_TARGET = "any"

TARGET_FLAG = str(Label("//vx_rules:target"))

VxTargetInfo = provider(fields = {"target": "the configured Vx target"})

def _vx_target_flag_impl(ctx):
    value = ctx.build_setting_value
    if value not in TARGETS and value != HIR_CONFIG_TARGET:
        fail("invalid value %r for --%s: expected one of %s (or --config=%s)" % (
            value,
            str(ctx.label),
            ", ".join(TARGETS),
            "|".join(TARGETS),
        ))
    return [VxTargetInfo(target = value)]

vx_target_flag = rule(
    implementation = _vx_target_flag_impl,
    build_setting = config.string(flag = True),
    doc = "The Vx target to compile kernels for: cpu (default), tpu, b200 or h100.",
)

# Host CPU levels for cpu artifacts. The default is a named level, so an object built
# on one machine is the object every machine builds: remote caches stay correct.
# `native` (this machine's CPU) is faster and must not be shared through a cache.
CPUS = ["x86-64-v3", "x86-64-v4", "x86-64-v2", "x86-64", "native"]

VxCpuInfo = provider(fields = {"cpu": "the CPU level cpu artifacts are compiled for"})

def _vx_cpu_flag_impl(ctx):
    value = ctx.build_setting_value
    if value not in CPUS:
        fail("invalid value %r for --%s: expected one of %s" % (value, str(ctx.label), ", ".join(CPUS)))
    return [VxCpuInfo(cpu = value)]

vx_cpu_flag = rule(
    implementation = _vx_cpu_flag_impl,
    build_setting = config.string(flag = True),
    doc = "The CPU level of cpu artifacts: x86-64-v3 (default), x86-64-v4, x86-64-v2, x86-64, native.",
)

def _hir_transition_impl(settings, attr):
    return {TARGET_FLAG: HIR_CONFIG_TARGET}

# Resets the target so that the checked HIR is built in one configuration for all
# targets.
hir_transition = transition(
    implementation = _hir_transition_impl,
    inputs = [],
    outputs = [TARGET_FLAG],
)

def _split_targets_impl(settings, attr):
    return {t: {TARGET_FLAG: t} for t in attr.targets}

# Builds the kernel once per listed target, each in its own configuration (and so
# its own output directory).
split_targets_transition = transition(
    implementation = _split_targets_impl,
    inputs = [],
    outputs = [TARGET_FLAG],
)

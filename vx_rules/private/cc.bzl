"""A cpu kernel as C/C++ code: CcInfo for cc_* callers and the shared library that
vxc.runtime loads, both made by the registered C++ toolchain (never a tool on PATH)."""

load("@bazel_tools//tools/build_defs/cc:action_names.bzl", "ACTION_NAMES")
load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

CC_TOOLCHAIN_TYPE = "@bazel_tools//tools/cpp:toolchain_type"

# Bazel 4.2.3 finds the C++ toolchain through this attribute; Bazel 7 through
# toolchain resolution (CC_TOOLCHAIN_TYPE). find_cpp_toolchain handles both.
CC_ATTRS = {
    "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
}

def cc_toolchain_and_features(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    features = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    return cc_toolchain, features

def link_shared_library(ctx, cc_toolchain, features, obj, out):
    """`out` (named as the manifest names it, soname included) linked from the kernel's
    object by the toolchain's dynamic-library link action."""
    action = ACTION_NAMES.cpp_link_dynamic_library
    variables = cc_common.create_link_variables(
        cc_toolchain = cc_toolchain,
        feature_configuration = features,
        output_file = out.path,
        is_linking_dynamic_library = True,
        user_link_flags = ["-shared", "-Wl,-soname," + out.basename, obj.path],
    )
    ctx.actions.run(
        executable = cc_common.get_tool_for_action(feature_configuration = features, action_name = action),
        arguments = cc_common.get_memory_inefficient_command_line(
            feature_configuration = features,
            action_name = action,
            variables = variables,
        ),
        env = cc_common.get_environment_variables(
            feature_configuration = features,
            action_name = action,
            variables = variables,
        ),
        inputs = depset([obj], transitive = [cc_toolchain.all_files]),
        outputs = [out],
        mnemonic = "VxLinkShared",
        progress_message = "Linking %s with the C++ toolchain" % out.short_path,
    )

def kernel_cc_info(ctx, cc_toolchain, features, obj, header, name):
    """CcInfo: the header on the include path (`#include "<stem>.cpu.h"`), and the object
    in a static library archived by the toolchain."""
    compilation_context = cc_common.create_compilation_context(
        headers = depset([header]),
        includes = depset([header.dirname]),
    )
    linking_context, _ = cc_common.create_linking_context_from_compilation_outputs(
        actions = ctx.actions,
        feature_configuration = features,
        cc_toolchain = cc_toolchain,
        compilation_outputs = cc_common.create_compilation_outputs(
            objects = depset([obj]),
            pic_objects = depset([obj]),
        ),
        name = name,
        disallow_dynamic_library = True,
    )
    return CcInfo(compilation_context = compilation_context, linking_context = linking_context)

"""Offline repositories that Bazel 4.2.3 references implicitly.

Debian's bazel-bootstrap cannot download from mirror.bazel.build or GitHub. Its
@bazel_tools packages load @rules_cc and @rules_java (toolchain resolution parses
@bazel_tools//tools/jdk:all), and test rules depend on @remote_coverage_tools.
In Bazel 4 the rules themselves are built in, so @rules_cc and @rules_java here are
the thin forwarders to the native rules that those repositories' defs.bzl were;
@remote_coverage_tools provides the coverage tools' labels as a tool that fails
loudly when coverage is actually requested.
"""

def _forwarders(names):
    return "".join([
        "def {n}(**kwargs):\n    native.{n}(**kwargs)\n\n".format(n = n)
        for n in names
    ])

_CC = ["cc_binary", "cc_import", "cc_library", "cc_proto_library", "cc_shared_library", "cc_test", "cc_toolchain", "cc_toolchain_suite", "fdo_prefetch_hints", "fdo_profile", "objc_import", "objc_library"]

_JAVA = ["java_binary", "java_import", "java_library", "java_lite_proto_library", "java_package_configuration", "java_plugin", "java_proto_library", "java_runtime", "java_test", "java_toolchain"]

_COVERAGE_BUILD = """\
package(default_visibility = ["//visibility:public"])

sh_binary(name = "coverage_report_generator", srcs = ["unavailable.sh"])

sh_binary(name = "lcov_merger", srcs = ["unavailable.sh"])

filegroup(name = "coverage_output_generator", srcs = ["unavailable.sh"])
"""

_UNAVAILABLE = """#!/bin/sh
echo "coverage tools are not available in this offline Bazel (Debian bazel-bootstrap)" >&2
exit 1
"""

def _offline_repository_impl(rctx):
    rctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % rctx.name)
    kind = rctx.attr.kind
    if kind == "rules_cc":
        rctx.file("BUILD.bazel", "")
        rctx.file("cc/BUILD.bazel", "")
        rctx.file("cc/defs.bzl", _forwarders(_CC))
    elif kind == "rules_java":
        rctx.file("BUILD.bazel", "")
        rctx.file("java/BUILD.bazel", "")
        rctx.file("java/defs.bzl", _forwarders(_JAVA))
    elif kind == "remote_coverage_tools":
        rctx.file("unavailable.sh", _UNAVAILABLE, executable = True)
        rctx.file("BUILD.bazel", _COVERAGE_BUILD)
    else:
        fail("unknown offline repository kind " + kind)

offline_repository = repository_rule(
    implementation = _offline_repository_impl,
    attrs = {"kind": attr.string(mandatory = True)},
)

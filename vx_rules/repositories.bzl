"""WORKSPACE-mode setup (Bazel 4.2.3).

    load("@vx//vx_rules:repositories.bzl", "vx_rules_dependencies", "vx_register_toolchains")
    vx_rules_dependencies()
    vx_register_toolchains()                 # python = True: also the Python toolchain
"""

load("//vx_rules/private:python_env.bzl", "vx_python_env")
load("//vx_rules/private:stubs.bzl", "offline_repository")

def vx_rules_dependencies(offline_stubs = True):
    if not native.existing_rule("vx_python"):
        vx_python_env(name = "vx_python", lock = Label("//:requirements.lock"))
    if not offline_stubs:
        return

    # Debian's Bazel 4.2.3 cannot download these; toolchain resolution and
    # `bazel test` need them (see private/stubs.bzl).
    for name in ["rules_cc", "rules_java", "remote_coverage_tools"]:
        if not native.existing_rule(name):
            offline_repository(name = name, kind = name)

def vx_register_toolchains(python = False):
    """The Vx compiler toolchain; with python = True also the locked environment's
    interpreter as the Python toolchain (for py_test/py_binary callers of kernels that
    use @vx//:runtime or @vx//:vxc_py, whose numpy is built for that interpreter; see
    docs/BAZEL.md). Opt-in: by default the workspace's own Python toolchain runs its
    py_* targets."""
    native.register_toolchains(str(Label("//vx_rules:vx_default_toolchain")))
    if python:
        native.register_toolchains(str(Label("//vx_rules:vx_python_toolchain")))

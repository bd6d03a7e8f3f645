"""Module extensions for bzlmod (Bazel 7): the locked Python environment."""

load("//vx_rules/private:python_env.bzl", "vx_python_env")

def _vx_python_impl(mctx):
    vx_python_env(name = "vx_python", lock = Label("//:requirements.lock"))

vx_python = module_extension(
    implementation = _vx_python_impl,
    doc = "Provides @vx_python, the compiler's environment built from requirements.lock.",
)

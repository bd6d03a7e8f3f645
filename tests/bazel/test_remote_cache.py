"""A shared remote cache from any checkout: Debian's nginx (WebDAV) serves Bazel's
HTTP cache protocol on loopback; clone A (at one path, with the developer's HOME)
builds //kernels/... for every config and uploads; clone B (another path, another
HOME, so another locked-environment store, and an empty output_user_root) then
gets every VxCompile action from the cache, with byte-identical outputs. The same
for examples/, the workspace that consumes the rules as @vx.

Slow: about 4-6 minutes on 2 cores (the first run also provisions clone B's
locked environment, about 2 minutes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bazelrun import bazel_binary
from remote import CONFIGS, REMOTE, Clone, HttpCache, copy_repository

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def setup():
    bazel = bazel_binary()
    if bazel is None:
        pytest.skip("no bazel on PATH (install with ./bazelw or apt-get install bazel-bootstrap)")
    cache = HttpCache(REMOTE / "http-cache")
    a_path = copy_repository(REMOTE / "a" / "vx")
    b_path = copy_repository(REMOTE / "b" / "elsewhere" / "checkout")
    a = Clone(a_path, Path.home(), REMOTE / "a" / "root", bazel)
    # Clone B's HOME holds its own locked-environment store, kept between runs
    # (provisioning it is not what is tested); its Bazel state is emptied.
    b = Clone(b_path, REMOTE / "b" / "home", REMOTE / "b" / "root", bazel)
    yield cache, a, b
    for c in (a, b):
        for sub in ("", "examples"):
            c.subdir = sub
            c.shutdown()
    cache.stop()


def _roundtrip(cache, a, b, subdir, pattern, package):
    flags = (f"--remote_cache={cache.url}",)
    for c in (a, b):
        c.subdir = subdir
        c.fresh()
    total = {"a": 0, "b": 0, "hits": 0}
    for config in CONFIGS:
        targets = a.targets(config, pattern)
        assert targets, config
        ra = a.build(config, targets, *flags)
        rb = b.build(config, targets, *flags)
        print(
            f"{subdir or '.'} {config}: A {ra.wall_s:.1f} s {ra.vxcompile} VxCompile {ra.runners}; "
            f"B {rb.wall_s:.1f} s {rb.hits}/{rb.vxcompile} hits {rb.runners}"
        )
        assert ra.vxcompile > 0 and ra.hits == 0, (config, ra)
        assert rb.vxcompile == ra.vxcompile, (config, ra, rb)
        assert rb.hits == rb.vxcompile, (
            f"{config}: {rb.hits}/{rb.vxcompile} VxCompile remote cache hits {rb.runners}"
        )
        total["a"] += ra.vxcompile
        total["b"] += rb.vxcompile
        total["hits"] += rb.hits
    oa, ob = a.outputs(package), b.outputs(package)
    assert oa and oa == ob, sorted(set(oa.items()) ^ set(ob.items()))[:20]
    # the two clones really had different locked-environment stores
    assert a.home != b.home and a.path != b.path
    return total


def test_second_clone_with_another_home_gets_every_vxcompile_from_the_cache(setup):
    cache, a, b = setup
    total = _roundtrip(cache, a, b, "", "//kernels/...", "kernels")
    assert total["hits"] == total["b"] > 0


def test_examples_workspace_too(setup):
    cache, a, b = setup
    total = _roundtrip(cache, a, b, "examples", "//...", "hello")
    assert total["hits"] == total["b"] > 0

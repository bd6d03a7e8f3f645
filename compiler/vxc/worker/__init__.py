"""The VxCompile persistent worker (Bazel's proto worker protocol).

- ``framing``: length-delimited protobuf frames on a byte stream.
- ``server``: the request loop (many requests per process, cancel, verbosity,
  malformed frames); it drives any handler ``(args, ctx) -> (exit_code, output)``.
- ``action``: the VxCompile action itself (``hir`` and ``build`` modes) on top of
  ``vxc.api``, with the in-memory checked-HIR cache.
- ``python -m vxc.worker``: ``--persistent_worker`` for Bazel, or one-shot with
  ``@flagfile`` arguments (the standalone strategy), producing identical outputs.
"""

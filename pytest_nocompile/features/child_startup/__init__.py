"""Child start-up: what runs in a process a watched test started. The start-up files installed
beside the package (``pytest-nocompile.pth``, ``pytest-nocompile.start``) call :mod:`.hook`,
which does nothing unless the process's environment names a test's folder; then :mod:`.startup`
writes each compile, recompile and graph break to a file of its own (:mod:`.event_writer`), the
process named in a few words (:mod:`.command_line`). :mod:`.run_target` runs a piece of a user's
code watched in a fresh process; ``--nocompile-check-hook`` says whether the hook is live
(:mod:`.hook_check`); ``watch_this_process`` and ``child_env`` serve a process the hook cannot
reach.

Hooks: none of a test's life; the start-up files run it in the child, and the children island's
``pytest_cmdline_main`` runs its check. Stdlib only: every process a watched test starts
imports this package.
"""

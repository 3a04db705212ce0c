"""The stderr relay: this process's stderr passed through a process of its own while a test reads
syncs, so that the lines torch's C++ code writes at a sync are counted, not printed.

:mod:`.stderr_relay` is this process's end (:data:`~.stderr_relay.RELAY`), :mod:`.relay_process`
the relay's own program, and :mod:`.pytest_stderr` steps around pytest's capture of fd 2 while it
is on. The syncs island (:mod:`..syncs.cpp_syncs`) starts and stops it; nothing here imports
that island.

Hooks: none (a helper of the syncs island).
"""

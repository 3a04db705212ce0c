"""What the plugin can see on the torch installed here: ``python -m pytest_nocompile doctor``
compiles tiny functions in its own process, with ``backend="eager"`` and with inductor for what
only inductor gives, through the same capture a watched test counts from (:mod:`.probes`). It
prints each signal, each of its witnesses, and whether the plugin saw the witness and read its
text (:mod:`.findings`; the command's arguments: :mod:`.command`). It exits 1 where a witness is
dark, so that a CI job can run it after a torch upgrade and go red before a gate passes blind.

Hooks: none. It is a command of :mod:`pytest_nocompile.__main__`, not a plugin of a run, so no run
registers it (:data:`..COMMANDS`).
"""

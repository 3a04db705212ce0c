"""Merging shards: ``python -m pytest_nocompile merge OUT IN [IN ...]`` makes one baseline
(``--nocompile-save``) or one JSON report (``--nocompile-json``) of those that the shards of a
suite wrote (:mod:`.merge`; the command's arguments: :mod:`.command`).

Hooks: none. It is a command of :mod:`pytest_nocompile.__main__`, not a plugin of a run, so no run
registers it (:data:`..COMMANDS`).
"""

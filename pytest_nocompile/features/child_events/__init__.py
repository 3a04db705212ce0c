"""Child events: what a test's child processes wrote, from the test's side: each process's file
read once, never trusting what is there (:mod:`.event_files`), each line checked
(:mod:`.child_lines`) and taken into the test's record as an event of its process, in the phase it
was logged in (:mod:`.child_intake`); and the removal of what was written, within a budget
(:mod:`.tree_removal`).

Hooks: none; the children feature's folders (:mod:`..children`) and the warm start
(:mod:`..caches.warm_start`) read through it, as the reports of a test's record
(``RecompileRecord.read_children_from``).
"""

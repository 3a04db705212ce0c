"""Child processes a test starts: the start-up hook that watches them, the event files they write,
the run's folders and their removal, and the lines read back, checked, for the test's record.

May import: observe/, vocabulary/. Imported by record/ and the steps after it.
"""

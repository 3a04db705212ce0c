"""The path the start-up files installed beside the package name (:mod:`.hook`)."""

"""kueue-jobframework: Kueue's jobframework in Python."""

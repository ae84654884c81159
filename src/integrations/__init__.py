"""Reference integrations built on :mod:`jobframework` (one subpackage per job kind)."""

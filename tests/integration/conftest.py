"""Tests here marked ``cluster`` use the session fixture ``cluster_info``.

It lives in ``tests/conftest.py``, so the contract suite's ``cluster`` backend and these
tests share one real cluster per session (start-ups are slow on a small machine).
"""

"""CertWatcher under random rotations: it serves the last valid pair seen at a poll."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from jobframework.webhook import CertificateAuthority, CertWatcher

_CA = CertificateAuthority.generate()
#: Three valid (certificate, key) pairs; mixing their halves gives pairs that do not load.
PAIRS = [_CA.issue(["127.0.0.1"]) for _ in range(3)]
GARBAGE = b"-----BEGIN CERTIFICATE-----\nnot base64 !\n-----END CERTIFICATE-----\n"

actions = st.lists(
    st.one_of(
        st.tuples(st.just("pair"), st.integers(0, 2)),
        st.tuples(st.just("cert"), st.integers(0, 2)),
        st.tuples(st.just("key"), st.integers(0, 2)),
        st.tuples(st.just("garbage"), st.just(0)),
        st.tuples(st.just("poll"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(actions)
def test_watcher_follows_the_last_valid_pair(steps: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cert_file, key_file = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_file.write_bytes(PAIRS[0][0])
        key_file.write_bytes(PAIRS[0][1])
        watcher = CertWatcher(cert_file, key_file)
        on_disk = [0, 0]  # which pair each file comes from (-1: garbage)
        served, reloads = 0, 0
        for action, i in steps:
            if action == "pair":
                cert_file.write_bytes(PAIRS[i][0])
                key_file.write_bytes(PAIRS[i][1])
                on_disk = [i, i]
            elif action == "cert":
                cert_file.write_bytes(PAIRS[i][0])
                on_disk[0] = i
            elif action == "key":
                key_file.write_bytes(PAIRS[i][1])
                on_disk[1] = i
            elif action == "garbage":
                cert_file.write_bytes(GARBAGE)
                on_disk[0] = -1
            else:
                changed = watcher.poll()
                valid = on_disk[0] == on_disk[1] and on_disk[0] >= 0
                expect_change = valid and on_disk[0] != served
                assert changed is expect_change
                if expect_change:
                    served, reloads = on_disk[0], reloads + 1
            assert watcher.certificate_pem == PAIRS[served][0]
            assert watcher.reloads == reloads

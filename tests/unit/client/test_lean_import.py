"""Our client loads only the parts of kubernetes-asyncio it uses; the rest stays one
attribute access away. Each case runs in a fresh interpreter (imports are process-wide)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_generated_models_and_apis_are_not_loaded() -> None:
    out = run("""
        import sys
        import jobframework.runtime.client.rest
        loaded = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.models.")
                  or m.startswith("kubernetes_asyncio.client.api.")]
        print(len(loaded))
    """)
    assert out == "0"


def test_the_rest_of_kubernetes_asyncio_still_imports_on_use() -> None:
    out = run("""
        import jobframework.runtime.client.rest
        import kubernetes_asyncio
        from kubernetes_asyncio.client import CoreV1Api, V1Pod
        import kubernetes_asyncio.watch
        ka = kubernetes_asyncio
        print(CoreV1Api.__name__, V1Pod.__name__, ka.client.models.V1Job.__name__,
              ka.watch.Watch.__name__, ka.config.ConfigException.__name__)
    """)
    assert out == "CoreV1Api V1Pod V1Job Watch ConfigException"


def test_a_kubernetes_asyncio_imported_first_is_left_as_it_is() -> None:
    out = run("""
        import sys
        import kubernetes_asyncio
        import jobframework.runtime.client.rest
        print(type(sys.modules["kubernetes_asyncio.client"]).__name__,
              "kubernetes_asyncio.client.models.v1_pod" in sys.modules)
    """)
    assert out == "module True"

"""Re-record ``data/kube_apiserver_golden.json`` from a real kube-apiserver.

Not a test. Needs the control plane binaries (``python -m jobframework.testing.cluster
build``); starts a private etcd and kube-apiserver on loopback ports, sends the requests
the engines model, writes what the server answered, and stops both::

    python tests/unit/engines/record_golden.py [--bin-dir DIR] [--seed 7]

Then run ``pytest tests/unit/engines/test_golden.py``: a failure is a behaviour the
engines do not reproduce yet.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib.util
import json
import random
import shutil
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jobframework.testing.cluster import pki
from jobframework.testing.cluster.binaries import bin_dir
from jobframework.testing.cluster.kube import Kube, KubeError

HERE = Path(__file__).parent
OUT = HERE / "data" / "kube_apiserver_golden.json"

#: The test CRD of the apply sequences: keyed, set and atomic lists, atomic and granular maps.
SSA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {
            "type": "string"
        },
        "kind": {
            "type": "string"
        },
        "metadata": {
            "type": "object"
        },
        "spec": {
            "type": "object",
            "properties": {
                "queueName": {
                    "type": "string"
                },
                "priority": {
                    "type": "integer"
                },
                "x": {
                    "type": "integer"
                },
                "args": {
                    "type": "array",
                    "items": {
                        "type": "string"
                    }
                },
                "tags": {
                    "type": "array",
                    "items": {
                        "type": "string"
                    },
                    "x-kubernetes-list-type": "set"
                },
                "sel": {
                    "type": "object",
                    "x-kubernetes-map-type": "atomic",
                    "properties": {
                        "a": {
                            "type": "string"
                        },
                        "b": {
                            "type": "string"
                        }
                    }
                },
                "m": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "string"
                    }
                },
                "podSets": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": [
                        "name"
                    ],
                    "items": {
                        "type": "object",
                        "required": [
                            "name"
                        ],
                        "properties": {
                            "name": {
                                "type": "string"
                            },
                            "count": {
                                "type": "integer"
                            },
                            "minCount": {
                                "type": "integer"
                            }
                        }
                    }
                }
            }
        },
        "status": {
            "type": "object",
            "properties": {
                "phase": {
                    "type": "string"
                },
                "conditions": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": [
                        "type"
                    ],
                    "items": {
                        "type": "object",
                        "required": [
                            "type"
                        ],
                        "properties": {
                            "type": {
                                "type": "string"
                            },
                            "status": {
                                "type": "string"
                            }
                        }
                    }
                }
            }
        }
    }
}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def control_plane(binaries: Path) -> Iterator[Kube]:
    """etcd + kube-apiserver on loopback, stopped (and their state removed) on exit."""
    state = Path(tempfile.mkdtemp(prefix="golden-"))
    creds = pki.generate(state / "pki", "10.0.0.1")
    etcd_port, peer_port, api_port = _port(), _port(), _port()
    procs = [subprocess.Popen([
        str(binaries / "etcd"), "--name=default", f"--data-dir={state / 'etcd'}",
        f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
        f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
        f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
        f"--initial-cluster=default=http://127.0.0.1:{peer_port}", "--unsafe-no-fsync=true",
        "--log-level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    procs.append(subprocess.Popen([
        str(binaries / "kube-apiserver"), f"--etcd-servers=http://127.0.0.1:{etcd_port}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
        f"--secure-port={api_port}", f"--cert-dir={state / 'certs'}",
        f"--tls-cert-file={creds.apiserver.cert}",
        f"--tls-private-key-file={creds.apiserver.key}", f"--client-ca-file={creds.ca.cert}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={creds.sa_public}",
        f"--service-account-signing-key-file={creds.sa_private}",
        "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=RBAC",
        "--profiling=false"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    kube = Kube(f"https://127.0.0.1:{api_port}", creds.ca.cert, creds.admin.cert,
                creds.admin.key)
    try:
        deadline = time.monotonic() + 300
        while True:
            with contextlib.suppress(Exception):
                if kube.get_text("/readyz") == "ok":
                    break
            if time.monotonic() > deadline:
                raise SystemExit("kube-apiserver not ready")
            time.sleep(1)
        yield kube
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(state, ignore_errors=True)


def main() -> None:
    """Record the golden file (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin-dir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # hypothesis' .example() outside a test
    with control_plane(args.bin_dir or bin_dir()) as kube:
        recorder = Recorder(kube, random.Random(args.seed))
        golden = {
            "note": "Recorded from a local kube-apiserver by record_golden.py.",
            "validation": recorder.validation_cases(schemas=12, per_schema=8),
            "ssa": {"schema": SSA_SCHEMA, "sequences": recorder.apply_sequences(30)},
        }
    OUT.write_text(json.dumps(golden, separators=(",", ":"), sort_keys=True))
    print(f"wrote {OUT}")


def _generators() -> Any:
    # The random schemas and values of test_schema.py (--import-mode=importlib: load by path).
    spec = importlib.util.spec_from_file_location("engines_test_schema", HERE / "test_schema.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Recorder:
    """Sends requests to one kube-apiserver and keeps what it answers."""

    def __init__(self, kube: Kube, rng: random.Random) -> None:
        self.kube = kube
        self.rng = rng

    def req(self, method: str, path: str, body: Any = None, ct: str = "application/json",
            query: dict[str, str] | None = None) -> tuple[int, Any]:
        try:
            return 200, self.kube.request(method, path, body, content_type=ct, query=query)
        except KubeError as err:
            return err.status, json.loads(err.body)

    def install_crd(self, group: str, kind: str, plural: str, schema: dict[str, Any],
                    status: bool = False) -> bool:
        version: dict[str, Any] = {"name": "v1", "served": True, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}
        if status:
            version["subresources"] = {"status": {}}
        code, _ = self.req("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", {
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced", "versions": [version],
                     "names": {"kind": kind, "plural": plural, "singular": plural,
                               "listKind": kind + "List"}}})
        if code not in (200, 201):
            return False
        for _ in range(100):
            _, crd = self.req(
                "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.{group}")
            conditions = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                break
            time.sleep(0.3)
        time.sleep(1.5)  # the new resource reaches the handler chain
        return True

    # -- validation: random objects of random schemas, many broken on purpose

    def validation_cases(self, schemas: int, per_schema: int) -> list[dict[str, Any]]:
        from jobframework.testing._schema import StructuralSchema

        gen = _generators()
        cases: list[dict[str, Any]] = []
        made = 0
        while made < schemas:
            raw = {"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": {"type": "object"}, "spec": gen._raw_schemas.example()}}
            plural = f"g{made}x{self.rng.randrange(10**6)}"
            kind = "G" + plural.upper()
            if not self.install_crd("gold.io", kind, plural, raw):
                continue  # a schema the apiserver refuses
            made += 1
            node = StructuralSchema(raw).root
            done = 0
            while done < per_schema:
                value = self.mutate(gen._from_schema(node).example(), node)
                if json.dumps(value) != json.dumps(value, ensure_ascii=False):
                    continue  # keep the file ASCII
                obj = {"apiVersion": "gold.io/v1", "kind": kind,
                       "metadata": {"name": f"o{done}", "namespace": "default"}}
                if "spec" in value:
                    obj["spec"] = value["spec"]
                code, body = self.req("POST", f"/apis/gold.io/v1/namespaces/default/{plural}", obj)
                case: dict[str, Any] = {"schema": raw, "object": obj, "code": code}
                if code in (200, 201):
                    case["stored"] = {k: v for k, v in body.items() if k != "metadata"}
                else:
                    case["message"] = body["message"]
                    case["causes"] = body.get("details", {}).get("causes", [])
                cases.append(case)
                done += 1
        return cases

    def mutate(self, value: Any, node: Any) -> Any:
        rng = self.rng
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, child in value.items():
                roll = rng.random()
                if roll < 0.08:
                    continue
                if roll < 0.16:
                    out[key] = rng.choice([None, 5, "s", [], {}, True, 1.5, -3, "x" * 12])
                    continue
                out[key] = self.mutate(child, node.field(key) if node is not None else None)
            if rng.random() < 0.15:
                out[f"zz{rng.randint(0, 3)}"] = rng.choice([1, "u", {"q": 1}])
            return out
        if isinstance(value, list):
            items = [self.mutate(v, node.items if node is not None else None) for v in value]
            if items and rng.random() < 0.2:
                items.append(copy.deepcopy(items[0]))
            return items
        return value

    # -- server-side apply: random applies and updates on one object

    def apply_sequences(self, count: int) -> list[list[dict[str, Any]]]:
        if not self.install_crd("ssa.io", "Wl", "wls", SSA_SCHEMA, status=True):
            raise SystemExit("the SSA test CRD was refused")
        return [self.sequence(f"w{i}") for i in range(count)]

    def spec(self) -> dict[str, Any]:
        rng = self.rng
        spec: dict[str, Any] = {}
        if rng.random() < .5:
            spec["queueName"] = rng.choice(["q1", "q2"])
        if rng.random() < .4:
            spec["priority"] = rng.randint(0, 2)
        if rng.random() < .3:
            spec["args"] = rng.sample(["x", "y", "z"], rng.randint(0, 2))
        if rng.random() < .3:
            spec["tags"] = rng.sample(["t1", "t2", "t3"], rng.randint(0, 2))
        if rng.random() < .3:
            spec["sel"] = {k: "1" for k in rng.sample(["a", "b"], rng.randint(1, 2))}
        if rng.random() < .3:
            spec["m"] = {k: rng.choice(["1", "2"])
                         for k in rng.sample(["k1", "k2", "k3"], rng.randint(0, 2))}
        if rng.random() < .6:
            pod_sets = []
            for name in rng.sample(["a", "b", "c"], rng.randint(0, 3)):
                item: dict[str, Any] = {"name": name}
                if rng.random() < .7:
                    item["count"] = rng.randint(1, 2)
                if rng.random() < .3:
                    item["minCount"] = 1
                pod_sets.append(item)
            spec["podSets"] = pod_sets
        for key in ("m", "podSets", "args", "sel", "queueName"):
            if rng.random() < .06:
                spec[key] = None
        return spec

    def status(self) -> dict[str, Any]:
        rng = self.rng
        status: dict[str, Any] = {}
        if rng.random() < .5:
            status["phase"] = rng.choice(["A", "B"])
        if rng.random() < .7:
            status["conditions"] = [{"type": t, "status": rng.choice(["True", "False"])}
                                    for t in rng.sample(["X", "Y", "Z"], rng.randint(0, 2))]
        return status

    def sequence(self, name: str) -> list[dict[str, Any]]:
        rng = self.rng
        path = f"/apis/ssa.io/v1/namespaces/default/wls/{name}"
        live: dict[str, Any] | None = None
        steps: list[dict[str, Any]] = []
        for _ in range(8):
            if live is None or rng.random() < .6:
                manager, force = rng.choice(["a", "b", "c"]), rng.random() < .4
                sub = "status" if live is not None and rng.random() < .3 else None
                config: dict[str, Any] = {"apiVersion": "ssa.io/v1", "kind": "Wl",
                                          "metadata": {"name": "w", "namespace": "default"}}
                if sub:
                    config["status"] = self.status()
                else:
                    config["spec"] = self.spec()
                    if rng.random() < .3:
                        config["metadata"]["labels"] = {
                            k: "v" for k in rng.sample(["l1", "l2"], rng.randint(1, 2))}
                sent = copy.deepcopy(config)
                sent["metadata"]["name"] = name
                code, body = self.req(
                    "PATCH", path + ("/status" if sub else ""), sent,
                    ct="application/apply-patch+yaml",
                    query={"fieldManager": manager, "force": str(force).lower()})
                step: dict[str, Any] = {"op": "apply", "manager": manager, "force": force,
                                        "subresource": sub, "config": config}
            else:
                manager = rng.choice(["u1", "u2"])
                sub = "status" if rng.random() < .3 else None
                change = self.status() if sub else self.spec()
                new = copy.deepcopy(live)
                new["status" if sub else "spec"] = change
                code, body = self.req("PUT", path + ("/status" if sub else ""), new,
                                      query={"fieldManager": manager})
                step = {"op": "update", "manager": manager, "subresource": sub, "body": change}
            step["code"] = code
            if code == 200:
                live = body
                obj = copy.deepcopy(body)
                for key in ("uid", "resourceVersion", "creationTimestamp", "generation"):
                    obj["metadata"].pop(key, None)
                entries = obj["metadata"].pop("managedFields", [])
                obj["metadata"]["name"] = "w"
                step["object"] = obj
                step["managedFields"] = sorted(
                    ({k: v for k, v in e.items() if k != "time"} for e in entries),
                    key=lambda e: json.dumps(e, sort_keys=True))
            else:
                step["message"] = str(body.get("message")).replace(name, "w")
            steps.append(step)
        return steps


if __name__ == "__main__":
    main()

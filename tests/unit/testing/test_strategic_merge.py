"""Strategic merge patches on built-in kinds merge keyed lists, as the real apiserver does."""

from __future__ import annotations

from jobframework.runtime.client import PatchType
from jobframework.runtime.objects import GVK
from jobframework.testing import APIServer

POD = GVK("", "v1", "Pod")


async def test_strategic_merge_patch_merges_containers_by_name() -> None:
    client = APIServer().client()
    await client.create({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]},
    })
    patched = await client.patch(
        POD, "p", {"spec": {"containers": [{"name": "b", "image": "z"}]}},
        namespace="default", patch_type=PatchType.STRATEGIC)
    assert [(c["name"], c["image"]) for c in patched["spec"]["containers"]] == [
        ("a", "x"), ("b", "z")]
    merged = await client.patch(
        POD, "p", {"spec": {"containers": [{"name": "b", "image": "w"}]}},
        namespace="default", patch_type=PatchType.MERGE)
    assert [c["name"] for c in merged["spec"]["containers"]] == ["b"]

"""The controller runtime: what Kueue's reconcilers get from controller-runtime, in asyncio.

Subpackages, lowest layer first: :mod:`.client` (API access), :mod:`.cache` (informers,
indexers, cache-backed reader), :mod:`.workqueue`, :mod:`.controller` / :mod:`.manager`
(builder, leader election, health, metrics), :mod:`.events` (event recorder).
"""

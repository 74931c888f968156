"""Cluster documents for tests, shaped like the product docs' own (snake_case) examples."""

from __future__ import annotations

from typing import Any


def cluster_doc(
    project: str = "demo-project",
    region: str = "us-central1",
    cluster_id: str = "extra01",
    *,
    nodes: int = 2,
    snake: bool = False,
) -> dict[str, Any]:
    """A small Slurm cluster: one compute pool ``gpu`` and a ``login`` pool."""
    doc: dict[str, Any] = {
        "name": f"projects/{project}/locations/{region}/modelDevelopmentClusters/{cluster_id}",
        "display_name": f"test cluster {cluster_id}",
        "network": {
            "network": f"projects/{project}/global/networks/default",
            "subnetwork": f"projects/{project}/regions/{region}/subnetworks/default",
        },
        "node_pools": [
            {
                "id": "gpu",
                "zone": f"{region}-a",
                "machine_spec": {
                    "machine_type": "a3-ultragpu-8g",
                    "accelerator_type": "NVIDIA_H200_141GB",
                    "accelerator_count": 8,
                },
                "scaling_spec": {"min_node_count": nodes, "max_node_count": nodes},
                "provisioning_model": "ON_DEMAND",
                "boot_disk": {"boot_disk_type": "hyperdisk-balanced", "boot_disk_size_gb": 100},
            },
            {
                "id": "login",
                "zone": f"{region}-a",
                "machine_spec": {"machine_type": "n2-standard-8"},
                "scaling_spec": {"min_node_count": 1, "max_node_count": 1},
                "enable_public_ips": True,
            },
        ],
        "orchestrator_spec": {
            "slurm_spec": {
                "home_directory_storage": f"projects/{project}/locations/{region}-a/instances/home",
                "partitions": [{"id": "gpu", "node_pool_ids": ["gpu"]}],
                "default_partition_id": "gpu",
                "login_node_pool_id": "login",
                "config": {"PriorityType": "priority/multifactor"},
            }
        },
    }
    if not snake:
        from bot.sandbox.controlplane.wire import camelize

        doc = camelize(doc)
    return doc

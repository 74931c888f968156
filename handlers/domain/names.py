"""Where clusters live: a target (``project/region``) and a cluster's resource name."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Each part as Google writes it, and nothing else: a project id (lower-case letters, digits
# and hyphens), a region (us-central1), a Slurm cluster's id (1-10 lower-case letters and
# digits, a letter first: the API's own validation). A name that fits is safe in a URL as it
# is; one that does not (``x%2F..%2Fother-project``, ``..``, ``?``) is not a cluster's name.
PROJECT = r"[a-z][a-z0-9-]{4,61}[a-z0-9]"
REGION = r"[a-z]+-[a-z]+[0-9]+"
CLUSTER_ID = r"[a-z][a-z0-9]{0,9}"
PROJECT_NUMBER = r"[0-9]{1,20}"  # how the control plane names a project in what it answers
CLUSTER_NAME_RE = re.compile(
    rf"^projects/(?P<project>{PROJECT}|{PROJECT_NUMBER})/locations/(?P<region>{REGION})"
    rf"/modelDevelopmentClusters/(?P<cluster_id>{CLUSTER_ID})$"
)
TARGET_RE = re.compile(rf"^(?P<project>{PROJECT})/(?P<region>{REGION})$")
OPERATION_RE = re.compile(
    rf"^projects/(?:{PROJECT}|{PROJECT_NUMBER})/locations/{REGION}"
    r"/operations/[A-Za-z0-9_-]{1,128}$"
)


def target_of(name: str) -> str:
    """``project/region`` of a cluster's resource name, as kept (never raises)."""
    return "/".join(name.split("/")[1:4:2])


@dataclass(frozen=True, order=True)
class Target:
    """A project and region the bot watches, written ``project/region``."""

    project: str
    region: str

    @classmethod
    def parse(cls, text: str) -> Target:
        match = TARGET_RE.match(text.strip())
        if not match:
            raise ValueError(
                f"{text.strip()!r} is not a target; "
                "write project/region, e.g. my-project/us-central1"
            )
        return cls(match["project"], match["region"])

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def __str__(self) -> str:
        return f"{self.project}/{self.region}"


@dataclass(frozen=True)
class ClusterName:
    """The parts of ``projects/{p}/locations/{r}/modelDevelopmentClusters/{id}``."""

    project: str
    region: str
    cluster_id: str

    @classmethod
    def parse(cls, name: str) -> ClusterName:
        match = CLUSTER_NAME_RE.match(name)
        if not match:
            raise ValueError(f"{name!r} is not a cluster resource name")
        return cls(match["project"], match["region"], match["cluster_id"])

    @property
    def target(self) -> Target:
        return Target(self.project, self.region)

    def __str__(self) -> str:
        return f"{self.target.parent}/modelDevelopmentClusters/{self.cluster_id}"

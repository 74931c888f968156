"""Changes to a cluster, by what they do to the control plane (``effects``)."""

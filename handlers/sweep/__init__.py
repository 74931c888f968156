"""The sweep, the core's look at every cluster: what Slurm and the control plane say of it
(demand, broken nodes), the idle definition applied to it, and the report that keeps it.
Capabilities (idle alerts, health, spend, schedules) receive its clusters as listeners."""

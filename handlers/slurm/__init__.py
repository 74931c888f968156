"""Slurm: the words that read or change a cluster's Slurm, the rules of its settings,
partitions and scripts, and its views."""

"""Cluster health: broken nodes, failed clusters and stuck queues, alerted once."""

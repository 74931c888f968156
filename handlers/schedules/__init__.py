"""Off-hours schedules: a standing change, approved once, that scales a cluster's compute
pools to zero at "off" and back to their exact bounds at "on", never under running work."""

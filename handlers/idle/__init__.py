"""Idle clusters: the rules, the sweep that applies them, the alerts and their clicks."""

"""The core's vocabulary: clusters, node pools, operations and their names, the facts read
off them, and the typed errors of the control plane. ``bot/vertex`` is the HTTP client that
speaks these; nothing here knows HTTP."""

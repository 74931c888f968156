"""The read side: what is shown of clusters, their audit and their deleted specs. Nothing
here changes anything, and nothing here imports the flows that do (tests/test_layers.py)."""

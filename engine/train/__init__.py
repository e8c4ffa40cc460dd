"""Training, export and quantisation of decision-model bundles (needs the `train` extra: torch, onnx, optimum)."""

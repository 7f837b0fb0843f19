"""Sources of world events and decisions: simulator, Kubernetes, OTLP, files."""

"""resource.k8s.io objects and values: reading (``loader``), the typed model (``model``), quantities,
semantic versions, the CEL selector environment and API validation. Pure code, no I/O beyond
``loader`` reading the files it is asked to read."""

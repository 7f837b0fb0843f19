"""The seeded cluster simulator: scenarios, synthetic and trace-driven clusters, the event loop.

``scenario`` parses scenario files, ``cluster`` builds NVIDIA-shaped nodes and slices, ``traces``
turns the public Alibaba GPU traces into scenarios, ``loop`` runs the discrete-event simulation
that writes the world event log and decision records, ``output`` sends them to a sink.
"""

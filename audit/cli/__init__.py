"""The ``claimtrail`` command line (see ``main``)."""

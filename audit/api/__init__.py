"""The audit API: the HTTP face of the store, with auth, tenant scoping and explanations.

``create_app`` builds the FastAPI application around an opened ``AuditStore``; ``claimtrail
serve`` runs it with uvicorn. Every query is scoped to the caller's tenant (see ``auth``).
"""

"""The shapes shared by the store, the services, the API and the dashboard.

Frozen pydantic models, one per concept, so one declaration serves as the store's return type
and as the API's response schema. Imports nothing of ours: every other layer may import it.
"""

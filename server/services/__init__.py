"""Read-side services shared by the REST API and the dashboard (no web framework imports)."""

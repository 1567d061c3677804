"""The scalewatch dashboard: a Dash multi-page app mounted at /dashboard/."""

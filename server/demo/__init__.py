"""Simulated ScaleRL trainers: the `serve --demo` runs and the `scalewatch simulate` command.

presets (Table-1 recipes) -> simulator (pure generation + posting through trainer_client)
-> runner (the demo thread in the server) / cli (`simulate` against any server); realruns
loads the vendored Deep-GRPO curves posted as finished runs.
"""

"""One module per dashboard page: PATH (or PATH_TEMPLATE), TITLE, layout(), register_callbacks()."""

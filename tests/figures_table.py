"""A view's figures table (app/view.py `TextTable`) read back by row label and column title."""


def figures(view) -> dict[str, dict[str, str]]:
    """A view's figures table by row label, then by column title (a run's name)."""
    columns = view.table.table.columns
    data = view.table.source.data
    return {label: {c.title: data[c.field][i] for c in columns[1:]} for i, label in enumerate(data["c0"])}

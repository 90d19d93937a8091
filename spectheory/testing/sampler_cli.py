"""Command-line registration (filled in by the module's owner)."""


def register(sub) -> None:  # placeholder until the sub-command exists
    return None

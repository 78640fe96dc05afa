"""CEL (cel-python) errors in one line, as the controller reports them (the emulation has its own, `sim.cel`)."""


def error_message(error: Exception) -> str:
    """celpy's message on one line, without the dump of the whole activation it appends."""
    text = str(error.args[0]) if error.args else str(error)
    return " ".join(text.split(" (in activation", 1)[0].split())

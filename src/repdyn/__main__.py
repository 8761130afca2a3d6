"""``python -m repdyn`` is the ``repdyn`` command."""

from repdyn.cli import app

app()

"""``python -m cxrils`` runs the command line."""

from cxrils.cli import main

main()

"""`python -m etl.cli`: the same command line as the installed `etl`."""
from etl.cli import main

main()

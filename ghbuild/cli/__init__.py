"""The `ghbuild` command line, one module per concern: `main` (entry point and dispatch), `parser` (one
parser function per command, their help), `flags` (shared flags and argument types), `common` (config,
context and plan as the handlers get them), and the handlers by pipeline stage: `plan`, `bases`, `build`
(+ `build_job`), `records`, `publish`, `prune`, `schema`, `setup`, `adopt`, `runner`."""

from ghbuild.cli.main import COMMANDS as COMMANDS
from ghbuild.cli.main import interrupt_on_sigterm as interrupt_on_sigterm
from ghbuild.cli.main import main as main
from ghbuild.cli.main import run as run
from ghbuild.cli.parser import build_parser as build_parser
from ghbuild.errors import UsageError as UsageError

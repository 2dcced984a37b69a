from ghbuild.cli import run

run()

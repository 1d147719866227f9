from cronjobs.cli import run

run()

from cronjobs.cli import main

main()

"""``newsflow`` CLI commands of the crawl tier (registered in ``cli.main.COMMAND_MODULES``)."""

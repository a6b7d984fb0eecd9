"""``newsflow`` CLI commands of the crawl tier (registered in ``newsflow.cli.COMMAND_MODULES``)."""

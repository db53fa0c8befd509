"""mqadmin: the admin command line."""

"""A broker stand-in for the name server and mqadmin."""

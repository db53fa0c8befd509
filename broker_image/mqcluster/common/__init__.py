"""Small pieces shared by every process: configuration loading, addresses."""

"""Controller clusters of real processes, and a broker stand-in that speaks to them."""

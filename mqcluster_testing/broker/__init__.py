"""Real broker and name server processes."""

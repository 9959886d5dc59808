"""Timer stores behind one protocol; imports nothing else of timerstore."""

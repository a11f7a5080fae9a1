"""Time: the engine's clock, salience decay over time, and tasks run every so often."""

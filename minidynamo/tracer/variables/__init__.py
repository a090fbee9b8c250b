"""The VariableTracker hierarchy (see base.py for the map of subclasses)."""

"""Op families: one file per family; each primitive and all its rules live together there."""

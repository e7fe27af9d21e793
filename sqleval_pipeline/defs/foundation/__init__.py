"""The foundation job: everything an evaluation stands on, from raw data to the hostile suite."""

"""The ``planner`` command line."""

"""Courses: Gradescope's results.json and the gradebook that grades a class. May import
``outputs`` and everything below it."""

"""Which copy of the course this is: whether the exercise checks show their hints by default.

The course shows them (self-study). `make student HINTS=0` writes `HINTS = False` into the student
edition's copy of this file, so a graded class sees no hints wherever the edition's package is imported:
locally, and on Colab, whose first cell installs the package from the class's own repository. The
environment variable KIMIK3_HINTS, read at every check, overrides it (0 hides the hints, 1 shows them):
`exercises.hints_on()`.
"""

HINTS = True

"""Pure judges on numpy (or CuPy through ``xp``): exact inputs, float64 references,
error bounds, output diagnosis and the root-cause verdict. Tested with no GPU; imports only ``model``."""

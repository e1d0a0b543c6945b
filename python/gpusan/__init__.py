"""gpusan for Python programs."""

# Kept equal to the gpusan crates' version (scripts/python-wheel.sh checks it).
__version__ = "0.1.0"

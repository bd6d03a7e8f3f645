"""The fuzzer library (vxfuzz.py) sits beside its tests; pytest's rootdir-relative
import puts this folder on sys.path."""

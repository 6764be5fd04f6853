"""Planted error: a what-if override of an unknown key.

Rule: chip files: known keys.
"""
# ruff: noqa  (a deliberately wrong script: unused names and long lines are fine)
# expect: SpecError: trn2.yaml: override 'hbm.speed': no key 'speed' \(known: bandwidth_gbps, capacity_bytes, stacks\)
import trnsim


trnsim.load_chip('trn2', hbm__speed=3)

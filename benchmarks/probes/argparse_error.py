"""argparse rejects a bad argument: usage line on stderr, exit 2.

args: --epochs many
"""
import argparse

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int)
ns = p.parse_args()

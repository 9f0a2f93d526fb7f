"""Shared by the gate's script tests: the binary, the source tree, a scratch folder, a runner."""
import os
import subprocess
import sys
import tempfile

GPULEDGER = os.environ.get("GPULEDGER", "")
SOURCE = os.environ.get("GPULEDGER_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
if not GPULEDGER or not os.access(GPULEDGER, os.X_OK):
    print("GPULEDGER is not set to the binary: skipped")
    sys.exit(77)


def scratch(name):
    return tempfile.mkdtemp(prefix=f"gpl-{name}-")


def run(args, env=None, expect=None):
    """Runs a command; returns (exit status, stdout + stderr). With expect, asserts the status."""
    out = subprocess.run(args, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=240)
    text = out.stdout + out.stderr
    if expect is not None and out.returncode != expect:
        raise SystemExit(f"FAIL: {' '.join(args)} exited {out.returncode}, expected {expect}:\n{text}")
    return out.returncode, text


def expect_in(text, needle, what):
    if needle not in text:
        raise SystemExit(f"FAIL: {what}: {needle!r} not in:\n{text}")

#!/usr/bin/env sh
# Runs the step with the local Go toolchain (the image runs the compiled binary).
exec go run "$(dirname "$0")/pipeline.go"

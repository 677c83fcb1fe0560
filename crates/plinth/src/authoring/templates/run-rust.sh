#!/usr/bin/env sh
# Runs the step's release build; build it first with
#   cargo build --release --manifest-path "$(dirname "$0")/../Cargo.toml"
exec "$(dirname "$0")/../target/release/pipeline"

#!/usr/bin/env bash
# What a crate that depends on cutpoint with its default features builds: writes such a
# crate in a temporary folder, prints its `cargo tree` (normal dependencies), and fails
# when clap (or anything of the CLI) is among them. The CLI is the workspace's
# `cutpoint-cli` crate; library users must not pay for it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
cat >"$tmp/Cargo.toml" <<TOML
[package]
name = "dependent"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
cutpoint = { path = "$root" }

[workspace]
TOML
echo 'fn main() {}' >"$tmp/src/main.rs"
# The workspace's lock file pins the same versions CI builds with.
cp "$root/Cargo.lock" "$tmp/Cargo.lock"
tree=$(cargo tree --manifest-path "$tmp/Cargo.toml" -e normal --prefix none | sort -u)
echo "$tree" | sed 's/^/  /'
if echo "$tree" | grep -Eq '^(clap|clap_builder|clap_derive|cutpoint-cli) '; then
  echo "dependent-tree: the library pulls in the CLI's dependencies"; exit 1
fi
echo "dependent-tree: no clap among $(echo "$tree" | wc -l) crates"

#!/usr/bin/env bash
# Checks the minimum Rust version that the crates declare (`rust-version`
# in [workspace.package]) with the one toolchain this machine has: no other
# toolchain can be downloaded here. It fails when
#
# - the installed rustc is older than the declared version;
# - a crate of the workspace declares another version than the workspace;
# - a dependency locked in Cargo.lock (any platform, every feature)
#   declares a rust-version newer than ours: a user on our minimum could
#   not build it;
# - the workspace does not build (`cargo check`), dependencies resolved
#   with CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback, so that any
#   resolution cargo makes prefers versions that build on our minimum.
#
# What it cannot prove: that our own code compiles on the declared version
# when the installed one is newer (language features stabilized since are
# not detected; standard-library items are, by clippy's `incompatible_msrv`
# lint, which CI runs with -D warnings). Only a build with that toolchain
# proves it.
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "rust-version check FAILED: $*" >&2; exit 1; }
# older A B: version A is older than version B (1.94 and 1.94.0 are equal).
older() {
    local a=$1 b=$2
    [[ $a =~ ^[0-9]+\.[0-9]+$ ]] && a=$a.0
    [[ $b =~ ^[0-9]+\.[0-9]+$ ]] && b=$b.0
    [ "$a" != "$b" ] && [ "$(printf '%s\n%s\n' "$a" "$b" | sort -V | head -n 1)" = "$a" ]
}

declared=$(awk '/^\[workspace\.package\]/ { in_section = 1; next }
                /^\[/ { in_section = 0 }
                in_section && /^rust-version *=/ { gsub(/[" ]/, ""); sub(/^rust-version=/, ""); print }' Cargo.toml)
[ -n "$declared" ] || fail "no rust-version in [workspace.package] of Cargo.toml"
installed=$(rustc --version | awk '{ print $2 }' | sed 's/-.*//')
echo "declared rust-version: $declared; installed rustc: $installed ($(rustc --version))"
if older "$installed" "$declared"; then
    fail "rustc $installed is older than the declared rust-version $declared"
fi

metadata=$(cargo metadata --format-version 1 --all-features --locked)
members=$(jq -r '.workspace_members[]' <<<"$metadata")
while read -r name version; do
    [ "$version" = "$declared" ] || fail "crate $name declares rust-version '$version', the workspace $declared"
done < <(jq -r --arg members "$members" '($members | split("\n")) as $m
    | .packages[] | select(.id as $id | $m | index($id)) | "\(.name) \(.rust_version // "none")"' <<<"$metadata")

newer=()
while read -r name version rust_version; do
    if older "$declared" "$rust_version"; then newer+=("$name $version (rust-version $rust_version)"); fi
done < <(jq -r '.packages[] | select(.source != null and .rust_version != null) | "\(.name) \(.version) \(.rust_version)"' <<<"$metadata")
[ ${#newer[@]} -eq 0 ] || fail "locked dependencies need a newer Rust than $declared: ${newer[*]}"
echo "every crate declares $declared; no locked dependency declares a newer rust-version"

CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo check --workspace --all-features
echo "rust-version $declared: checked with rustc $installed (see this script's header for what that proves)"

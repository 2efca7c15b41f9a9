#!/usr/bin/env bash
# Packages every publishable crate of the workspace as `cargo publish` would
# upload it, in dependency order (crates not yet on the registry come from a
# local overlay of the packages made before them), and builds each package
# from its own files, which proves that it holds what it needs (its
# migrations, its embedded assets) and that its dependencies resolve from a
# registry. Nothing is uploaded. `queue-bench`, `queue-chaos` and
# `examples/traced-storage` are `publish = false` and skipped.
#
# Extra arguments go to `cargo publish`: `--no-verify` packages without the
# build (CI, to save its time: see .ci/run), `--allow-dirty` packages
# uncommitted changes.
set -euo pipefail
cd "$(dirname "$0")/.."

# The packages' own builds do not see the workspace's profile: keep their
# dependencies' debug info out, as the workspace does, to save time and disk.
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-false}"

# Every file a crate embeds with include_str!/include_bytes! (a literal
# path: the migrations, the dashboard's stylesheet) must be in its package.
# `--no-verify` does not build the packages, so this is what catches, there,
# an embedded file left outside its crate.
publishable=$(cargo metadata --format-version 1 --no-deps --locked \
    | jq -r '.packages[] | select(.publish != []) | "\(.name) \(.manifest_path)"')
while read -r name manifest; do
    dir=$(realpath "$(dirname "$manifest")")
    listed=$(cargo package -p "$name" --list --allow-dirty 2>/dev/null)
    count=0
    while IFS=: read -r file literal; do
        path=$(sed -E 's/.*include_(str|bytes)!\("([^"]+)"\).*/\2/' <<<"$literal")
        resolved=$(realpath -m "$(dirname "$file")/$path")
        relative=${resolved#"$dir"/}
        if [ "$relative" = "$resolved" ] || ! grep -qxF "$relative" <<<"$listed"; then
            echo "package $name: $file embeds $path, which its package does not hold" >&2
            exit 1
        fi
        count=$((count + 1))
    done < <(grep -roE 'include_(str|bytes)!\("[^"]+"\)' "$dir/src" || true)
    echo "package $name: every embedded file of its sources is in it ($count)"
done <<<"$publishable"

# Tests stay in the repository (they need the databases of scripts/test.sh),
# so cargo names every test target it leaves out of a package: drop those
# lines, keep everything else.
cargo publish --workspace --dry-run "$@" 2>&1 | grep -v '^warning: ignoring test `'

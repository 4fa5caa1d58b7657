#!/bin/sh
# Builds helm-render offline from Debian's Go packages (README.md beside this file):
#   scripts/helm-render/build.sh [output]   (default .tmp/helm-render/helm-render)
# Rebuilds only when main.go is newer than the binary.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/.tmp/helm-render/helm-render}
work=$root/.tmp/helm-render
gocode=/usr/share/gocode/src

if [ -x "$out" ] && [ ! "$here/main.go" -nt "$out" ]; then exit 0; fi
command -v go >/dev/null 2>&1 || { echo "helm-render: go is not installed (Debian package golang-go)" >&2; exit 1; }
for dir in github.com/Masterminds/sprig gopkg.in/yaml.v3; do
  [ -d "$gocode/$dir" ] || { echo "helm-render: $gocode/$dir is missing (Debian packages golang-github-masterminds-sprig-dev, golang-gopkg-yaml.v3-dev)" >&2; exit 1; }
done

# GOPATH mode, no network: Debian installs sprig v3 and semver v3 without the
# /v3 their import paths carry, so a GOPATH of our own holds them under it.
gopath=$work/gopath
for module in github.com/Masterminds/sprig github.com/Masterminds/semver; do
  mkdir -p "$gopath/src/$module"
  ln -sfn "$gocode/$module" "$gopath/src/$module/v3"
done
mkdir -p "$(dirname "$out")" "$work/cache"
cd "$here"
GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOCACHE="$work/cache" GOFLAGS= GOPROXY=off \
  go build -o "$out.tmp" main.go
mv "$out.tmp" "$out"

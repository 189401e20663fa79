#!/usr/bin/env bash
# Builds the Debian packages flowweight-controller and flowweight-probe with dpkg-deb (no other
# packaging tool): each holds its binary (/usr/bin), its systemd unit (configs/*.service, in
# /usr/lib/systemd/system), its commented configuration (/etc/flowweight, a conffile), the
# documentation, and maintainer scripts (scripts/deb/) that create the system user flowweight,
# give /etc/flowweight and the state directory their owners and modes, and create the
# controller's push secret and API token when they are missing. docs/operations.md, "Install from
# packages", says what is installed where and why.
#
# usage: scripts/package.sh [-o DIR]      packages into DIR (or $DIST; default ./dist)
#   VERSION=1.2.3     the package version (default: 0~gitTIME.gHASH, or after a tag vX.Y.Z
#                     X.Y.Z[+N.gHASH], with "+dirty" when git describe --always --dirty says so)
#   DEB_ARCH=arm64    the Debian architecture to build for (default: dpkg --print-architecture)
# Prints the path of each package it wrote. Needs bash, go, dpkg, dpkg-deb and, without
# VERSION, git. The configs/package_integration_test.go test installs the result into a
# temporary root and checks every file.
set -euo pipefail
umask 022
export PATH=$PATH:/usr/local/go/bin

die() {
	echo "package.sh: $*" >&2
	exit 1
}

out=${DIST:-./dist}
while (($#)); do
	case $1 in
	-o | --out)
		(($# >= 2)) || die "$1 needs a directory"
		out=$2
		shift 2
		;;
	--out=*)
		out=${1#--out=}
		shift
		;;
	-h | --help)
		sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"
		exit 0
		;;
	*) die "unknown argument \"$1\" (usage: scripts/package.sh [-o DIR])" ;;
	esac
done
[ -n "$out" ] || die "the output directory is empty (-o DIR or DIST)"

# Every tool first, all missing ones in one message.
missing=()
for tool in go dpkg dpkg-deb od stat install sed grep du; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
[ -n "${VERSION:-}" ] || command -v git >/dev/null || missing+=("git (or set VERSION)")
((${#missing[@]} == 0)) || die "not found on PATH: ${missing[*]} (dpkg and dpkg-deb: Debian package dpkg; go: /usr/local/go/bin)"

# The repository is the one this script is in, wherever it is run from.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if ! grep -qx 'module flowweight' "$repo/go.mod" 2>/dev/null || [ ! -d "$repo/scripts/deb" ] || [ ! -d "$repo/configs" ]; then
	die "$repo is not a flowweight repository (no go.mod saying \"module flowweight\", or no configs/ and scripts/deb/ next to it): run the package.sh of a flowweight checkout"
fi

# The version: VERSION, else the last tag vX.Y.Z (and commits since), else 0~git plus the
# commit's time and hash, so that later commits sort later; git describe --always --dirty
# gives the hash and "-dirty" for uncommitted changes, which become "+dirty".
if [ -z "${VERSION:-}" ]; then
	desc=$(git -C "$repo" describe --always --dirty 2>/dev/null) ||
		die "$repo is not a git checkout (git describe failed): set VERSION, e.g. VERSION=0.1.0"
	hash=$(git -C "$repo" rev-parse --short=7 HEAD)
	if tag=$(git -C "$repo" describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null); then
		VERSION=${tag#v}
		n=$(git -C "$repo" rev-list --count "$tag..HEAD")
		[ "$n" = 0 ] || VERSION+="+$n.g$hash"
	else
		VERSION="0~git$(TZ=UTC git -C "$repo" log -1 --format=%cd --date=format-local:%Y%m%d%H%M%S).g$hash"
	fi
	[[ $desc != *-dirty ]] || VERSION+="+dirty"
fi
[[ $VERSION =~ ^[0-9][A-Za-z0-9.+~]*$ ]] ||
	die "VERSION \"$VERSION\" is not a Debian version: a digit, then letters, digits and . + ~ only"

# The architecture, and Go's name for it.
arch=${DEB_ARCH:-$(dpkg --print-architecture)}
goarm=
case $arch in
amd64 | arm64 | s390x | riscv64 | loong64) goarch=$arch ;;
i386) goarch=386 ;;
armhf) goarch=arm goarm=7 ;;
armel) goarch=arm goarm=5 ;;
ppc64el) goarch=ppc64le ;;
mips64el) goarch=mips64le ;;
*) die "architecture \"$arch\" (DEB_ARCH or dpkg --print-architecture) has no Go port this script knows" ;;
esac

err=$(mkdir -p -- "$out" 2>&1) || die "cannot create the output directory $out: ${err#mkdir: }"
[ -d "$out" ] && [ -w "$out" ] || die "the output directory $out is not a writable directory"
out=$(cd "$out" && pwd)

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# Static binaries (no cgo): no libc dependency, and they run in any root, a chroot included.
build() { # PKG DIR: go build ./DIR as $stage/bin/PKG
	(cd "$repo" && CGO_ENABLED=0 GOOS=linux GOARCH=$goarch GOARM=$goarm \
		go build -trimpath -o "$stage/bin/$1" "./$2") || die "go build ./$2 failed"
}

# The controller's configuration as installed: the example, with api.token_file set to the
# token the postinst creates, so drains work from the first start.
controller_toml() {
	local line='# token_file = "/etc/flowweight/api.token" '
	local n
	n=$(grep -c "^$line" "$repo/configs/controller.toml" || true)
	[ "$n" = 1 ] || die "configs/controller.toml: expected one line starting '$line', found $n; update controller_toml in package.sh"
	{
		echo "# Installed by the flowweight-controller package: configs/controller.toml with api.token_file"
		echo "# set to the token the package created. Its services are examples: replace them."
		sed "s|^$line|token_file = \"/etc/flowweight/api.token\"  |" "$repo/configs/controller.toml"
	}
}

# package NAME CONFIG SUMMARY DESCRIPTION...: lays out and builds NAME's .deb from
# $stage/bin/NAME, configs/NAME.service, the configuration on stdin (installed as
# /etc/flowweight/CONFIG) and scripts/deb/NAME.*.
package() {
	local name=$1 conf=$2 summary=$3
	shift 3
	local root=$stage/$name
	install -d -m 0755 "$root" "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/systemd/system" \
		"$root/usr/share/doc/$name/docs"
	install -d -m 0750 "$root/etc/flowweight"
	install -m 0755 "$stage/bin/$name" "$root/usr/bin/$name"
	install -m 0644 "$repo/configs/$name.service" "$root/usr/lib/systemd/system/$name.service"
	cat >"$root/etc/flowweight/$conf"
	chmod 0640 "$root/etc/flowweight/$conf"
	install -m 0644 "$repo/README.md" "$root/usr/share/doc/$name/README.md"
	install -m 0644 "$repo"/docs/*.md "$root/usr/share/doc/$name/docs/"
	[ "$name" != flowweight-controller ] || install -d -m 0700 "$root/var/lib/flowweight"

	echo "/etc/flowweight/$conf" >"$root/DEBIAN/conffiles"
	for script in postinst prerm postrm; do
		{
			printf '#!/bin/sh\nset -e\n\n'
			cat "$repo/scripts/deb/common.sh"
			echo
			cat "$repo/scripts/deb/$name.$script"
		} >"$root/DEBIAN/$script"
		chmod 0755 "$root/DEBIAN/$script"
	done
	{
		echo "Package: $name"
		echo "Version: $VERSION"
		echo "Architecture: $arch"
		echo "Maintainer: ${MAINTAINER:-flowweight maintainers <maintainers@users.noreply.a-seed-a2c79add.example>}"
		echo "Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)"
		echo "Depends: passwd"
		echo "Section: net"
		echo "Priority: optional"
		echo "Description: $summary"
		for l in "$@"; do echo " $l"; done
	} >"$root/DEBIAN/control"
	dpkg-deb --root-owner-group -Zxz --build "$root" "$out/${name}_${VERSION}_${arch}.deb" >/dev/null ||
		die "dpkg-deb failed for $name"
	echo "$out/${name}_${VERSION}_${arch}.deb"
}

build flowweight-controller controller
build flowweight-probe probe
controller_toml >"$stage/controller.toml"
package flowweight-controller controller.toml <"$stage/controller.toml" \
	"dynamic OpenFlow select-group weights from backend load" \
	"The flowweight controller collects each backend's load (signed UDP reports from" \
	"flowweight-probe, or SNMP polls), computes select-group bucket weights and writes" \
	"them to Open vSwitch over OpenFlow 1.3. The package creates the system user" \
	"flowweight, the push secret and the API token; it does not start the controller."
package flowweight-probe probe.toml \
	"reports a backend's load and health to the flowweight controller" <"$repo/configs/probe.toml" \
	"The flowweight probe measures CPU, memory, connections and the health of the local" \
	"service and pushes one authenticated UDP report per interval to the controller." \
	"Its key comes from the controller (flowweight-controller key); it is not started."

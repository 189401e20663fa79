# Shared start of every maintainer script of flowweight-controller and flowweight-probe:
# scripts/package.sh writes "#!/bin/sh", "set -e", this file, then the package's own part.
#
# Every path goes through $DPKG_ROOT, which dpkg sets when it installs into another root
# with --force-script-chrootless (the package test does: configs/package_integration_test.go).
# There the scripts look users up in that root's files, create them with useradd --prefix,
# chown by number, and leave this machine's systemd alone.

FW_USER=flowweight
FW_ETC="$DPKG_ROOT/etc/flowweight"

# fw_getent DATABASE NAME prints NAME's entry in passwd or group: from the files under
# $DPKG_ROOT when installing into another root, else from the system's databases.
fw_getent() {
	if [ -n "$DPKG_ROOT" ]; then
		grep "^$2:" "$DPKG_ROOT/etc/$1" 2>/dev/null
	else
		getent "$1" "$2"
	fi
}

# fw_ensure_user creates the system group and user flowweight unless they exist (the units
# run as User=flowweight Group=flowweight), and sets FW_UID and FW_GID. Idempotent: both
# packages call it, and every configure does. The user has no shell, no home and no password.
fw_ensure_user() {
	if ! fw_getent group "$FW_USER" >/dev/null; then
		if [ -n "$DPKG_ROOT" ]; then
			groupadd --system --prefix "$DPKG_ROOT" "$FW_USER"
		else
			groupadd --system "$FW_USER"
		fi
	fi
	FW_GID=$(fw_getent group "$FW_USER" | cut -d: -f3)
	if ! fw_getent passwd "$FW_USER" >/dev/null; then
		set -- --system --gid "$FW_GID" --no-create-home --home-dir /var/lib/flowweight \
			--shell /usr/sbin/nologin --comment "flowweight daemons" "$FW_USER"
		if [ -n "$DPKG_ROOT" ]; then
			useradd --prefix "$DPKG_ROOT" "$@"
		else
			useradd "$@"
		fi
	fi
	FW_UID=$(fw_getent passwd "$FW_USER" | cut -d: -f3)
	if [ -z "$FW_UID" ] || [ -z "$FW_GID" ]; then
		echo "flowweight: user or group $FW_USER not found after creating it" >&2
		exit 1
	fi
}

# fw_etc_dir makes /etc/flowweight root:flowweight 0750: the daemons read their
# configuration and keys there but cannot create, replace or delete anything in it.
fw_etc_dir() {
	mkdir -p "$FW_ETC"
	chown "0:$FW_GID" "$FW_ETC"
	chmod 0750 "$FW_ETC"
}

# fw_conffile FILE gives a configuration file dpkg has just unpacked (root:root 0640) to
# group flowweight, so the daemon can read it. A file the operator gave another owner or
# group is left as it is.
fw_conffile() {
	if [ -f "$1" ] && [ "$(stat -c %u:%g "$1")" = 0:0 ]; then
		chgrp "$FW_GID" "$1"
		chmod 0640 "$1"
	fi
}

# fw_new_secret FILE creates FILE, root:flowweight 0640, holding 32 random bytes as 64 hex
# digits and a newline, unless FILE exists (as anything, a dangling symlink too): an existing
# secret is never replaced, whatever it holds. Hex, so the same file passes as an API token
# (printable ASCII) and can be pasted into a standby controller. The secret is never printed.
# It is written to a temporary file in the same directory and hard-linked into place, which
# fails rather than replaces if FILE appeared meanwhile.
fw_new_secret() {
	if [ -e "$1" ] || [ -L "$1" ]; then
		return 1
	fi
	fw_tmp=$(mktemp "$1.XXXXXX") || {
		echo "flowweight: could not create a temporary file next to $1" >&2
		exit 1
	}
	if ! od -An -tx1 -N32 /dev/urandom | tr -d ' \n' >"$fw_tmp" ||
		! echo >>"$fw_tmp" ||
		[ "$(wc -c <"$fw_tmp")" -ne 65 ] ||
		! chown "0:$FW_GID" "$fw_tmp" || ! chmod 0640 "$fw_tmp"; then
		rm -f "$fw_tmp"
		echo "flowweight: could not write a new secret for $1" >&2
		exit 1
	fi
	if ! ln "$fw_tmp" "$1" 2>/dev/null; then
		rm -f "$fw_tmp"
		return 1
	fi
	rm -f "$fw_tmp"
}

# fw_systemd ACTION UNIT talks to this machine's systemd, and only when it runs and dpkg
# installs into this machine (not into $DPKG_ROOT).
fw_systemd() {
	if [ -z "$DPKG_ROOT" ] && [ -d /run/systemd/system ]; then
		case "$1" in
		daemon-reload) systemctl daemon-reload || true ;;
		*) systemctl "$1" "$2" || true ;;
		esac
	fi
}

# fw_purge_unit UNIT forgets that the operator enabled UNIT (systemctl enable's symlinks):
# on purge, as dpkg forgets the rest of the package's configuration.
fw_purge_unit() {
	rm -f "$DPKG_ROOT/etc/systemd/system/multi-user.target.wants/$1"
	fw_systemd daemon-reload
}
